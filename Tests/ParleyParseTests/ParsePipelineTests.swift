import Foundation
import ParleyAccounts
import ParleyHTTP
import ParleyNet
import ParleyParse
import ParleyTestSupport
import Synchronization
import XCTest

/// The one request pipeline: inline answers give the full path's bytes, one authorization step
/// for requests and batch sub-requests, the session rule on every path, URLs from
/// `--public-url`, and the small endpoints of issue 13 §3.
final class ParsePipelineTests: XCTestCase {
    // MARK: Fast path and full path

    /// Runs `request` through both halves of its inline-first route: the inline answer (on a
    /// loop, as the server runs it) and the full async handler. Nil when the inline half declined.
    private func bothHalves(_ h: ParseHarness, _ request: HTTPRequest, beforeFullPath: () -> Void = {}) async throws
        -> (inline: HTTPResponse?, full: HTTPResponse) {
        guard case .found(let route, let parameters) = h.routes.match(request.head), case .inlineFirst(let attempt, let handler) = route.handler else {
            XCTFail("\(request.head.target) is not an inline-first route")
            throw CancellationError()
        }
        var routed = request
        routed.parameters = parameters
        let answer = Mutex<HTTPResponse?>(nil)
        let taken = Mutex<Bool?>(nil)
        let loop = h.group.loops[0]
        let request = routed
        loop.execute {
            taken.withLock { $0 = attempt(request, HTTPResponder { response in answer.withLock { $0 = response } }) }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while taken.withLock({ $0 }) == nil || (taken.withLock({ $0 }) == true && answer.withLock({ $0 }) == nil) {
            guard ContinuousClock.now < deadline else { throw XCTSkip("the inline answer did not come") }
            try await Task.sleep(for: .milliseconds(2))
        }
        beforeFullPath()
        let full = try await handler(request, RequestContext(parameters: parameters, remoteAddress: "127.0.0.1:1", loop: loop))
        return (taken.withLock { $0 } == true ? answer.withLock { $0 } : nil, full)
    }

    private func get(_ target: String, _ headers: [(String, String)]) throws -> HTTPRequest {
        HTTPRequest(head: try HTTPRequestHead(method: .get, target: target, headers: HTTPHeaders(headers)))
    }

    private func assertSameBytes(_ inline: HTTPResponse?, _ full: HTTPResponse, _ context: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let inline else { return XCTFail("\(context): the inline half declined", file: file, line: line) }
        XCTAssertEqual(inline.status, full.status, context, file: file, line: line)
        XCTAssertEqual(inline.headers.map { "\($0.name): \($0.value)" }, full.headers.map { "\($0.name): \($0.value)" }, context, file: file, line: line)
        XCTAssertEqual(String(decoding: inline.bodyBytes, as: UTF8.self), String(decoding: full.bodyBytes, as: UTF8.self), context, file: file, line: line)
    }

    func testInlineAnswersAreTheFullPathsBytes() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["age": 30, "ratio": 2.0, "name": "Al\"ice é"])
        _ = try h.signUp("bob", extra: ["age": 40])
        for n in 0..<4 {
            let acl: [String: Any] = n == 3 ? [alice.id: ["read": true]] : ["*": ["read": true]]
            _ = try h.call("POST", "/parse/classes/Card", body: ["n": n, "big": 1e300, "tags": ["a", 1], "ACL": acl])
        }
        let app = ("X-Parse-Application-Id", h.appID)
        // `/users/me`: the inline answer from the caches, the full path after the user cache was
        // emptied (it reads the row and writes it again).
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).status, 200)
        let me = try get("/parse/users/me", [app, ("X-Parse-Session-Token", alice.token)])
        let (inlineMe, fullMe) = try await bothHalves(h, me) { h.api.accounts.users.cache.removeAll() }
        assertSameBytes(inlineMe, fullMe, "/users/me")
        XCTAssertTrue(String(decoding: fullMe.bodyBytes, as: UTF8.self).contains(#""sessionToken":"\#(alice.token)""#))

        let finds: [(String, [(String, String)])] = [
            ("/parse/users" + query(["where": jsonText(["username": "alice"])]), [app]),
            ("/parse/users" + query(["where": jsonText(["age": ["$gte": 30]]), "order": "-age"]), [app, ("X-Parse-Session-Token", alice.token)]),
            ("/parse/users" + query(["order": "age"]), [app, ("X-Parse-Master-Key", h.masterKey)]),
            ("/parse/classes/_User" + query(["keys": "age", "where": jsonText(["username": "bob"])]), [app]),
            ("/parse/classes/Card" + query(["order": "-n", "limit": "3"]), [app, ("X-Parse-Session-Token", alice.token)]),
            ("/parse/classes/Card" + query(["order": "n"]), [app]),
            ("/parse/classes/Card" + query(["limit": "0"]), [app]),
            ("/parse/classes/NoSuchClass", [app]),
        ]
        for (target, headers) in finds {
            let (inline, full) = try await bothHalves(h, try get(target, headers))
            assertSameBytes(inline, full, target)
        }
        // Both halves decline or refuse alike: a wrong app id is not answered inline.
        let (wrongInline, wrongFull) = try await bothHalves(h, try get("/parse/users", [("X-Parse-Application-Id", "other")]))
        XCTAssertNil(wrongInline)
        XCTAssertEqual(wrongFull.status, 403)
        await h.shutdown()
    }

    func testTheSDKFormAndTheInlineFindAnswerTheSameBytesOverTheWire() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["age": 30])
        let inline = try h.call("GET", "/parse/users" + query(["where": jsonText(["age": 30])]), token: alice.token)
        let form = jsonText(["_method": "GET", "where": ["age": 30], "_ApplicationId": h.appID, "_SessionToken": alice.token])
        let full = try h.call("POST", "/parse/users", appID: .some(nil), headers: [("Content-Type", "text/plain")], rawBody: form)
        XCTAssertEqual(inline.status, 200)
        XCTAssertEqual(String(decoding: inline.body, as: UTF8.self), String(decoding: full.body, as: UTF8.self))
        await h.shutdown()
    }

    // MARK: The session rule on every path

    func testBannedUsersCachedSessionIsRefusedOnEveryPath() async throws {
        let h = try await ParseHarness()
        try await h.listenForAccountEvents()
        let mallory = try h.signUp("mallory")
        // Another node: its own caches over the same database.
        let other = Accounts(database: h.database, blockingPool: h.pool, configuration: AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        let seen = Mutex<[AccountEvent]>([])
        h.api.accounts.events.observe { event in seen.withLock { $0.append(event) } }

        // Cached here: `/users/me` is answered inline.
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: mallory.token).status, 200)
        let before = h.fullPath.requests
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: mallory.token).status, 200)
        XCTAssertEqual(h.fullPath.requests, before, "the session is cached")

        try await other.users.setBanned(objectId: mallory.id, banned: true, on: h.database)
        let deadline = ContinuousClock.now + .seconds(20)
        while !seen.withLock({ $0.contains(.sessionsRevoked(userId: mallory.id, reason: .banned, keeping: nil)) }) {
            guard ContinuousClock.now < deadline else { return XCTFail("the ban never reached this node") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let paths: [(String, String, Any?)] = [
            ("GET", "/parse/users/me", nil),
            ("GET", "/parse/users" + query(["where": jsonText(["username": "mallory"])]), nil),
            ("GET", "/parse/sessions/me", nil),
            ("PUT", "/parse/users/\(mallory.id)", ["bio": "still here"]),
            ("POST", "/parse/batch", ["requests": [["method": "GET", "path": "/parse/users/me"]]]),
        ]
        for (method, path, body) in paths {
            let reply = try h.call(method, path, body: body, token: mallory.token)
            XCTAssertEqual(reply.code, 209, "\(method) \(path): \(reply.json ?? "")")
        }
        let form = jsonText(["_method": "GET", "_ApplicationId": h.appID, "_SessionToken": mallory.token])
        XCTAssertEqual(try h.call("POST", "/parse/users/me", appID: .some(nil), rawBody: form).code, 209, "the SDK envelope's token")
        await h.shutdown()
    }

    func testASessionOfABannedUserIsRefusedEvenIfItsRowSurvived() async throws {
        let h = try await ParseHarness()
        let eve = try h.signUp("eve")
        // A session row the ban did not delete (a login racing with the ban, say).
        _ = try await h.database.query("UPDATE users SET banned = true WHERE object_id = $1", [.text(eve.id)])
        h.api.accounts.sessions.cache.removeAll()
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: eve.token).code, 209)
        do {
            _ = try await h.api.accounts.sessions.lookup(eve.token, on: h.database)
            XCTFail("a banned user's session was valid")
        } catch {
            XCTAssertEqual(error.code, 209, "\(error)")
        }
        await h.shutdown()
    }

    func testWhileEventsMayBeMissedNoSessionIsServedFromMemory() async throws {
        let h = try await ParseHarness()
        try await h.listenForAccountEvents()
        let alice = try h.signUp("alice")
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).status, 200)
        XCTAssertNotNil(h.api.accounts.sessions.cache.get(alice.token))
        // Cut this node's LISTEN connection: until it listens again, the cache is suspended.
        _ = try await h.database.query("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'parley-events'
            """)
        let deadline = ContinuousClock.now + .seconds(20)
        while h.api.accounts.sessions.cache.get(alice.token) != nil {
            guard ContinuousClock.now < deadline else { return XCTFail("the cut connection went unnoticed") }
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTAssertNil(h.api.accounts.sessions.cache.get(alice.token), "nothing cached survives a missed-events window")
        // A ban while this node may not hear it: the next request reads PostgreSQL.
        try await h.database.query("DELETE FROM sessions WHERE token = $1", [.text(alice.token)])
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: alice.token).code, 209)
        await h.shutdown()
    }

    // MARK: Batch sub-requests act as their batch

    func testBatchSubRequestsCannotBringCredentialsOfTheirOwn() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let reply = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "GET", "path": "/parse/installations", "body": ["_MasterKey": h.masterKey]],
            ["method": "PUT", "path": "/parse/users/\(bob.id)", "body": ["_SessionToken": bob.token, "bio": "hacked"]],
            ["method": "GET", "path": "/parse/users/me", "body": ["_SessionToken": bob.token]],
            ["method": "POST", "path": "/parse/classes/Note", "body": ["_ApplicationId": "other", "_MasterKey": "x", "text": "hi"]],
            ["method": "GET", "path": "/parse/serverInfo", "body": ["_MasterKey": h.masterKey]],
        ]], token: alice.token)
        XCTAssertEqual(reply.status, 200)
        let results = try XCTUnwrap(reply.json as? [[String: Any]])
        XCTAssertEqual((results[0]["error"] as? [String: Any])?["code"] as? Int, 119, "no master key from a sub-request body")
        XCTAssertEqual((results[1]["error"] as? [String: Any])?["code"] as? Int, 206, "no other session from a sub-request body")
        XCTAssertEqual((results[2]["success"] as? [String: Any])?["objectId"] as? String, alice.id, "the batch's own session")
        let note = try XCTUnwrap((results[3]["success"] as? [String: Any])?["objectId"] as? String)
        XCTAssertEqual((results[4]["error"] as? [String: Any])?["error"] as? String, "unauthorized: master key is required",
                       "serverInfo needs the batch's master key")
        let stored = try h.call("GET", "/parse/classes/Note/\(note)")
        XCTAssertEqual(stored["text"] as? String, "hi")
        XCTAssertNil(stored["_MasterKey"], "envelope members are never stored")
        XCTAssertNil(stored["_ApplicationId"])
        XCTAssertNil(try h.call("GET", "/parse/users/\(bob.id)")["bio"])

        // The batch itself passes the one authorization step.
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": []], appID: .some("other")).status, 403)
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/parse/users/me"]]], token: "r:00000000000000000000000000000000").code, 209)
        await h.shutdown()
    }

    func testBatchPathsResolveInTheRouteTable() async throws {
        let h = try await ParseHarness(serverURL: ParseServerURL(publicURL: "https://api.example.com/base"))
        let created = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "POST", "path": "/parse/classes/Item", "body": ["n": 1]],
            ["method": "POST", "path": "/1/classes/Item", "body": ["n": 2]],
            ["method": "POST", "path": "/base/parse/classes/Item", "body": ["n": 3]],
            ["method": "GET", "path": "/parse/classes/Item?order=n&keys=n"],
            ["method": "GET", "path": "/parse/nowhere"],
        ]])
        let results = try XCTUnwrap(created.json as? [[String: Any]], "\(created.json ?? "")")
        XCTAssertEqual(results.count, 5)
        let found = try XCTUnwrap((results[3]["success"] as? [String: Any])?["results"] as? [[String: Any]])
        XCTAssertEqual(found.map { $0["n"] as? Int }, [1, 2, 3])
        XCTAssertEqual((results[4]["error"] as? [String: Any])?["code"] as? Int, 107)
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/elsewhere/classes/Item"]]]).code, 107)
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": [["method": "POST", "path": "/1/batch", "body": ["requests": []]]]]).code, 107)
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": [["method": "PATCH", "path": "/parse/classes/Item"]]]).code, 107)
        await h.shutdown()
    }

    // MARK: URLs the server hands out

    func testLocationComesFromThePublicURLWhateverTheClientSays() async throws {
        let h = try await ParseHarness(serverURL: ParseServerURL(publicURL: "https://api.example.com/"))
        let spoofed: [(String, String)] = [("Host", "evil.example"), ("X-Forwarded-Host", "evil.example"), ("X-Forwarded-Proto", "http")]
        let reply = try h.call("POST", "/parse/classes/Thing", body: ["n": 1], headers: spoofed)
        XCTAssertEqual(reply.status, 201)
        let id = try XCTUnwrap(reply["objectId"] as? String)
        XCTAssertEqual(reply.header("Location"), "https://api.example.com/parse/classes/Thing/\(id)")
        let user = try h.call("POST", "/parse/users", body: ["username": "u", "password": "p"], headers: spoofed)
        XCTAssertEqual(user.header("Location"), "https://api.example.com/parse/users/\(user["objectId"] as? String ?? "")")
        await h.shutdown()
    }

    func testForwardedHeadersCountOnlyFromTrustedProxies() async throws {
        let untrusted = try await ParseHarness(serverURL: ParseServerURL(trustedProxies: [try XCTUnwrap(IPNetwork("10.0.0.0/8"))]))
        let forwarded: [(String, String)] = [("Host", "parley.internal:8080"), ("X-Forwarded-Host", "evil.example"), ("X-Forwarded-Proto", "https")]
        let direct = try untrusted.call("POST", "/parse/classes/Thing", body: ["n": 1], headers: forwarded)
        XCTAssertEqual(direct.header("Location"), "http://parley.internal:8080/parse/classes/Thing/\(direct["objectId"] as? String ?? "")",
                       "a client that is not a proxy cannot choose the scheme or host")
        let injected = try untrusted.call("POST", "/parse/classes/Thing", body: ["n": 1], headers: [("Host", "a b\"c")])
        XCTAssertEqual(injected.header("Location")?.hasPrefix("http://localhost/parse/classes/Thing/"), true, "a malformed Host is not echoed")
        await untrusted.shutdown()

        let proxied = try await ParseHarness(serverURL: ParseServerURL(trustedProxies: [try XCTUnwrap(IPNetwork("127.0.0.1"))]))
        let reply = try proxied.call("POST", "/parse/classes/Thing", body: ["n": 1], headers: forwarded + [("X-Forwarded-For", "203.0.113.9")])
        XCTAssertEqual(reply.header("Location"), "https://evil.example/parse/classes/Thing/\(reply["objectId"] as? String ?? "")",
                       "a trusted proxy's forwarded headers are believed")
        await proxied.shutdown()
    }

    // MARK: Small endpoints (issue 13 §3)

    func testHealthServerInfoRawBodiesAndInclude() async throws {
        let h = try await ParseHarness()
        let client = try TestHTTPClient(port: h.server.port)
        for method in ["GET", "POST"] {
            let health = try client.request(method, "/parse/health")
            XCTAssertEqual(health.status, 200, method)
            XCTAssertEqual(health.text, #"{"status":"ok"}"#, "no keys needed, as Parse Server")
        }

        let refused = try h.call("GET", "/parse/serverInfo")
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(refused["error"] as? String, "unauthorized: master key is required")
        let info = try h.call("GET", "/parse/serverInfo", master: true)
        XCTAssertEqual(info.status, 200)
        XCTAssertNotNil(info["parseServerVersion"] as? String)
        let features = try XCTUnwrap(info["features"] as? [String: [String: Bool]])
        XCTAssertEqual(Set(features.keys), ["globalConfig", "hooks", "cloudCode", "logs", "push", "schemas"])
        XCTAssertEqual(features["globalConfig"], ["create": true, "read": true, "update": true, "delete": true], "/config is served")
        XCTAssertTrue(features.filter { $0.key != "globalConfig" }.values.allSatisfy { $0.values.allSatisfy { !$0 } },
                      "Parley serves none of the other endpoints yet: \(features)")

        // A raw body where JSON is expected: 107 naming what was expected.
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
        let raw = try client.request("POST", "/parse/classes/Photo", headers: [("X-Parse-Application-Id", h.appID), ("Content-Type", "image/png")], body: png)
        XCTAssertEqual(raw.status, 400)
        let error = try XCTUnwrap(raw.json as? [String: Any])
        XCTAssertEqual(error["code"] as? Int, 107)
        XCTAssertTrue((error["error"] as? String)?.contains("expects a JSON object (application/json); the body (12 bytes, Content-Type image/png) is not JSON") == true,
                      "\(error)")
        let array = try h.call("POST", "/parse/classes/Photo", rawBody: "[1,2]")
        XCTAssertEqual(array.code, 107)
        XCTAssertTrue((array["error"] as? String)?.contains("not an array") == true, "\(array.json ?? "")")

        // `include`: a fetch and a find answer the same way.
        let author = try XCTUnwrap(try h.call("POST", "/parse/classes/Author", body: ["name": "a"])["objectId"] as? String)
        let id = try XCTUnwrap(try h.call("POST", "/parse/classes/Post", body: ["title": "t", "author": ["__type": "Pointer", "className": "Author", "objectId": author]])["objectId"] as? String)
        let fetch = try h.call("GET", "/parse/classes/Post/\(id)" + query(["include": "author"]))
        let find = try h.call("GET", "/parse/classes/Post" + query(["include": "author"]))
        XCTAssertEqual((fetch["author"] as? [String: Any])?["name"] as? String, "a", "\(fetch.json ?? "")")
        XCTAssertEqual(((find["results"] as? [[String: Any]])?.first?["author"] as? [String: Any])?["name"] as? String, "a")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post/\(id)" + query(["include": ""])).status, 200, "an empty include is no include")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post/\(id)" + query(["keys": "title"]))["title"] as? String, "t")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post/\(id)" + query(["where": "{}"])).code, 102, "not a fetch parameter")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post/\(id)" + query(["include": "bad-name"])).code, 102)
        let form = jsonText(["_method": "GET", "_ApplicationId": h.appID, "include": "author"])
        let sdkFetch = try h.call("POST", "/parse/classes/Post/\(id)", appID: .some(nil), rawBody: form)
        XCTAssertEqual((sdkFetch["author"] as? [String: Any])?["__type"] as? String, "Object", "the SDK form of a fetch too")
        await h.shutdown()
    }
}
