import Foundation
import ParleyHTTP
import ParleyTestSupport
import XCTest

final class ParseUsersTests: XCTestCase {
    func testEnvelopeAppIdRestKeyAndErrors() async throws {
        let h = try await ParseHarness(restKey: "rest")

        let noApp = try h.call("GET", "/parse/users/me", appID: .some(nil))
        XCTAssertEqual(noApp.status, 403)
        XCTAssertEqual(noApp["error"] as? String, "unauthorized")
        let wrongApp = try h.call("GET", "/parse/classes/Foo", appID: "other")
        XCTAssertEqual(wrongApp.status, 403)
        // REST key required when configured (sent by the harness), master key bypasses it.
        let client = try h.call("GET", "/parse/classes/Foo")
        XCTAssertEqual(client.status, 200)
        XCTAssertEqual((client["results"] as? [Any])?.count, 0)
        let badJSON = try h.call("POST", "/parse/classes/Foo", rawBody: "{not json")
        XCTAssertEqual(badJSON.status, 400)
        XCTAssertEqual(badJSON.code, 107)
        let noRoute = try h.call("GET", "/parse/nothing/here")
        XCTAssertEqual(noRoute.status, 404)
        // Header names are case-insensitive.
        let lower = try h.call("GET", "/parse/classes/Foo", appID: .some(nil), headers: [("x-parse-application-id", h.appID)])
        XCTAssertEqual(lower.status, 200)
        let options = try h.call("OPTIONS", "/parse/users", appID: .some(nil))
        XCTAssertEqual(options.status, 200)
        XCTAssertEqual(options.header("Access-Control-Allow-Origin"), "*")
        XCTAssertEqual(options.header("Access-Control-Allow-Methods"), "GET,PUT,POST,DELETE,OPTIONS")
        XCTAssertTrue(options.header("Access-Control-Allow-Headers")?.contains("X-Parse-Session-Token") ?? false)
        // The preflight's headers only on the preflight; every response allows any origin.
        for response in [lower, noRoute, badJSON] {
            XCTAssertEqual(response.header("Access-Control-Allow-Origin"), "*")
            XCTAssertNil(response.header("Access-Control-Allow-Headers"))
            XCTAssertNil(response.header("Access-Control-Allow-Methods"))
        }
        await h.shutdown()
    }

    func testRestKeyRefusedWhenWrong() async throws {
        let h = try await ParseHarness(restKey: "rest")
        let client = try TestClientWithoutKey(h)
        XCTAssertEqual(try client.status("GET", "/parse/classes/Foo"), 403)
        XCTAssertEqual(try client.status("GET", "/parse/classes/Foo", extra: [("X-Parse-Master-Key", h.masterKey)]), 200)
        await h.shutdown()
    }

    func testSignupLoginMeLogoutAndErrorCodes() async throws {
        let h = try await ParseHarness()
        let signup = try h.call("POST", "/parse/users", body: ["username": "Alice", "password": "pw", "email": "a@x.io", "screenName": "Al", "age": 30])
        XCTAssertEqual(signup.status, 201)
        let id = try XCTUnwrap(signup["objectId"] as? String)
        XCTAssertEqual(id.count, 10)
        XCTAssertNotNil(signup["createdAt"] as? String)
        let token = try XCTUnwrap(signup["sessionToken"] as? String)
        XCTAssertTrue(token.hasPrefix("r:") && token.count == 34)
        XCTAssertEqual(signup.header("Location"), "http://127.0.0.1/parse/users/\(id)")

        XCTAssertEqual(try h.call("POST", "/parse/users", body: ["username": "alice", "password": "x"]).code, 202)
        XCTAssertEqual(try h.call("POST", "/parse/users", body: ["username": "bob", "password": "x", "email": "A@X.io"]).code, 203)
        XCTAssertEqual(try h.call("POST", "/parse/users", body: ["password": "x"]).code, 200)
        XCTAssertEqual(try h.call("POST", "/parse/users", body: ["username": "bob"]).code, 201)
        XCTAssertEqual(try h.call("POST", "/parse/users", body: ["username": "bob", "password": "x", "email": "nope"]).code, 125)
        let typeChange = try h.call("POST", "/parse/users", body: ["username": "bob", "password": "x", "age": "old"])
        XCTAssertEqual(typeChange.status, 400)
        XCTAssertEqual(typeChange.code, 111)

        // Login by GET with query parameters and by POST body.
        let login = try h.call("GET", "/parse/login" + query(["username": "Alice", "password": "pw"]))
        XCTAssertEqual(login.status, 200)
        XCTAssertEqual(login["objectId"] as? String, id)
        XCTAssertEqual(login["screenName"] as? String, "Al")
        XCTAssertNil(login["password"])
        let loginToken = try XCTUnwrap(login["sessionToken"] as? String)
        let postLogin = try h.call("POST", "/parse/login", body: ["username": "Alice", "password": "pw"])
        XCTAssertEqual(postLogin.status, 200)

        let wrong = try h.call("GET", "/parse/login" + query(["username": "Alice", "password": "nope"]))
        XCTAssertEqual(wrong.status, 404)
        XCTAssertEqual(wrong.code, 101)
        XCTAssertEqual(wrong["error"] as? String, "Invalid username/password.")
        let unknown = try h.call("GET", "/parse/login" + query(["username": "ghost", "password": "pw"]))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.code, 101)

        let me = try h.call("GET", "/parse/users/me", token: loginToken)
        XCTAssertEqual(me.status, 200)
        XCTAssertEqual(me["username"] as? String, "Alice")
        XCTAssertEqual(me["email"] as? String, "a@x.io")
        XCTAssertEqual(me["sessionToken"] as? String, loginToken)
        let cached = try h.call("GET", "/parse/users/me", token: loginToken)
        XCTAssertEqual(cached.json as? NSDictionary, me.json as? NSDictionary, "the cached copy serializes the same user")
        let other = try h.call("GET", "/parse/users/me", token: token)
        XCTAssertEqual(other["sessionToken"] as? String, token, "the cached user carries each caller's own token")
        let noToken = try h.call("GET", "/parse/users/me")
        XCTAssertEqual(noToken.status, 400)
        XCTAssertEqual(noToken.code, 209)
        let badToken = try h.call("GET", "/parse/users/me", token: "r:0123456789abcdef0123456789abcdef")
        XCTAssertEqual(badToken.code, 209)

        XCTAssertEqual(try h.call("POST", "/parse/logout", token: loginToken).status, 200)
        let revoked = try h.call("GET", "/parse/users/me", token: loginToken)
        XCTAssertEqual(revoked.status, 400)
        XCTAssertEqual(revoked.code, 209)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: token).status, 200, "the signup session is still valid")
        await h.shutdown()
    }

    func testUserReadUpdateDeleteRules() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["email": "alice@x.io"])
        let bob = try h.signUp("bob")
        let seen = try h.call("GET", "/parse/users/\(alice.id)", token: bob.token)
        XCTAssertEqual(seen.status, 200)
        XCTAssertEqual(seen["username"] as? String, "alice")
        XCTAssertNil(seen["email"], "email hidden from other users")
        XCTAssertNil(seen["sessionToken"])
        XCTAssertEqual(try h.call("GET", "/parse/users/\(alice.id)", master: true)["email"] as? String, "alice@x.io")

        let forbidden = try h.call("PUT", "/parse/users/\(alice.id)", body: ["age": 1], token: bob.token)
        XCTAssertEqual(forbidden.status, 400)
        XCTAssertEqual(forbidden.code, 206)
        XCTAssertEqual(try h.call("DELETE", "/parse/users/\(alice.id)", token: bob.token).code, 206)
        XCTAssertEqual(try h.call("DELETE", "/parse/users/\(alice.id)").code, 206)

        let update = try h.call("PUT", "/parse/users/\(alice.id)", body: ["age": 31, "location": ["__type": "GeoPoint", "latitude": 1.5, "longitude": 2.5]], token: alice.token)
        XCTAssertEqual(update.status, 200)
        XCTAssertNotNil(update["updatedAt"] as? String)
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["age": 32], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["age": "x"], token: alice.token).code, 111)

        // Password change revokes other sessions, keeps the current one.
        let second = try XCTUnwrap(try h.call("POST", "/parse/login", body: ["username": "alice", "password": "pw"])["sessionToken"] as? String)
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["password": "new"], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: second).code, 209)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).status, 200)

        // Query users: equality on username (the proximity app's caller-name lookup), count.
        let found = try h.call("GET", "/parse/users" + query(["where": jsonText(["username": "alice"])]), token: bob.token)
        XCTAssertEqual(found.status, 200)
        let results = try XCTUnwrap(found["results"] as? [[String: Any]])
        XCTAssertEqual(results.count, 1)
        XCTAssertEqual(results.first?["age"] as? Int, 32)
        XCTAssertNil(results.first?["email"])
        let counted = try h.call("GET", "/parse/users" + query(["count": "1", "limit": "0"]), token: bob.token)
        XCTAssertEqual(counted["count"] as? Int, 2)
        XCTAssertEqual((counted["results"] as? [Any])?.count, 0)
        let emailQuery = try h.call("GET", "/parse/users" + query(["where": jsonText(["email": "alice@x.io"])]), token: bob.token)
        XCTAssertEqual(emailQuery.code, 119)
        let badQuery = try h.call("GET", "/parse/users" + query(["where": jsonText(["age": ["$foo": 1]])]))
        XCTAssertEqual(badQuery.code, 102)

        XCTAssertEqual(try h.call("DELETE", "/parse/users/\(alice.id)", token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).code, 209)
        XCTAssertEqual(try h.call("GET", "/parse/users/\(alice.id)", master: true).status, 404)
        await h.shutdown()
    }

    func testBannedUserAndExpiredSession() async throws {
        let h = try await ParseHarness()
        let mallory = try h.signUp("mallory")
        try await h.api.accounts.users.setBanned(objectId: mallory.id, banned: true, on: h.database)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: mallory.token).code, 209)
        let login = try h.call("POST", "/parse/login", body: ["username": "mallory", "password": "pw"])
        XCTAssertEqual(login.status, 404)
        XCTAssertEqual(login.code, 101)

        let eve = try h.signUp("eve")
        _ = try await h.database.query("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token = $1", [.text(eve.token)])
        h.api.accounts.sessions.cache.invalidate(token: eve.token)
        let expired = try h.call("GET", "/parse/users/me", token: eve.token)
        XCTAssertEqual(expired.status, 400)
        XCTAssertEqual(expired.code, 209)
        XCTAssertEqual(expired["error"] as? String, "Session token is expired.")
        await h.shutdown()
    }

    func testSessionsEndpoints() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let me = try h.call("GET", "/parse/sessions/me", token: alice.token)
        XCTAssertEqual(me.status, 200)
        XCTAssertEqual(me["sessionToken"] as? String, alice.token)
        XCTAssertEqual((me["user"] as? [String: Any])?["objectId"] as? String, alice.id)
        XCTAssertEqual((me["createdWith"] as? [String: String]), ["action": "signup", "authProvider": "password"])
        XCTAssertEqual((me["expiresAt"] as? [String: Any])?["__type"] as? String, "Date")
        let sessionId = try XCTUnwrap(me["objectId"] as? String)

        _ = try h.call("POST", "/parse/login", body: ["username": "alice", "password": "pw"], headers: [("X-Parse-Installation-Id", "device-1")])
        let list = try h.call("GET", "/parse/sessions", token: alice.token)
        let sessions = try XCTUnwrap(list["results"] as? [[String: Any]])
        XCTAssertEqual(sessions.count, 2, "own sessions only")
        XCTAssertTrue(sessions.contains { $0["installationId"] as? String == "device-1" })
        XCTAssertEqual(try h.call("GET", "/parse/sessions", master: true)["results"].map { ($0 as? [Any])?.count }, 3)

        let byId = try h.call("GET", "/parse/sessions/\(sessionId)", token: alice.token)
        XCTAssertEqual(byId["sessionToken"] as? String, alice.token)
        XCTAssertEqual(try h.call("GET", "/parse/sessions/\(sessionId)", token: bob.token).status, 404)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/_Session/\(sessionId)", body: ["restricted": true], token: alice.token).code, 119)
        XCTAssertEqual(try h.call("DELETE", "/parse/sessions/\(sessionId)", token: bob.token).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/sessions/\(sessionId)", token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).code, 209)
        XCTAssertEqual(try h.call("GET", "/parse/sessions/me").code, 209)
        await h.shutdown()
    }

    func testAccountLockoutOverHTTP() async throws {
        let h = try await ParseHarness(accounts: .init(lockoutThreshold: 1, lockoutMinutes: 7, passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        _ = try h.signUp("target")
        XCTAssertEqual(try h.call("POST", "/parse/login", body: ["username": "target", "password": "bad"]).code, 101)
        let locked = try h.call("POST", "/parse/login", body: ["username": "target", "password": "pw"])
        XCTAssertEqual(locked.status, 404)
        XCTAssertEqual(locked["error"] as? String, "Your account is locked due to multiple failed login attempts. Please try again after 7 minute(s)")
        await h.shutdown()
    }
}

/// Requests with the app id but without the REST key.
struct TestClientWithoutKey {
    let harness: ParseHarness
    init(_ harness: ParseHarness) throws { self.harness = harness }
    func status(_ method: String, _ path: String, extra: [(String, String)] = []) throws -> Int {
        let client = try TestHTTPClient(port: harness.server.port)
        return try client.request(method, path, headers: [("X-Parse-Application-Id", harness.appID)] + extra).status
    }
}

final class ParseCachedMeTests: XCTestCase {
    func testCachedMeAnswersOnlyCacheHitsWithTheRightKeys() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        func request(_ headers: [(String, String)]) throws -> HTTPRequest {
            HTTPRequest(head: try HTTPRequestHead(method: .get, target: "/parse/users/me", headers: HTTPHeaders(headers)))
        }
        let good = try request([("X-Parse-Application-Id", h.appID), ("X-Parse-Session-Token", alice.token)])
        XCTAssertNil(h.api.cachedMe(good), "the user is not cached before the first full request")
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).status, 200)
        let response = try XCTUnwrap(h.api.cachedMe(good))
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.bodyBytes)) as? [String: Any])
        XCTAssertEqual(json["username"] as? String, "alice")
        XCTAssertEqual(json["sessionToken"] as? String, alice.token)
        XCTAssertNil(h.api.cachedMe(try request([("X-Parse-Application-Id", "other"), ("X-Parse-Session-Token", alice.token)])))
        XCTAssertNil(h.api.cachedMe(try request([("X-Parse-Application-Id", h.appID), ("X-Parse-Session-Token", "r:0123456789abcdef0123456789abcdef")])))
        XCTAssertEqual(try h.call("POST", "/parse/logout", token: alice.token).status, 200)
        XCTAssertNil(h.api.cachedMe(good), "logout drops the cached session")
        await h.shutdown()
    }
}
