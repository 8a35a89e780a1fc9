import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

final class UserStoreTests: XCTestCase {
    func testSignupLoginMeAndErrors() async throws {
        let h = try await AccountsHarness(prefix: "users")
        let users = h.accounts.users, db = h.client
        let alice = try await h.signUp("Alice", password: "secret", email: "alice@example.com", fields: ["screenName": "Al", "age": 30])
        XCTAssertEqual(alice.objectId.count, 10)
        XCTAssertNotNil(alice.session)

        await XCTAssertParseError(202) { try await h.signUp("alice") }
        await XCTAssertParseError(203) { try await h.signUp("bob", email: "ALICE@example.com") }
        await XCTAssertParseError(200) { try await users.signUp(body: ["password": "x"], auth: .anonymous, on: db) }
        await XCTAssertParseError(201) { try await users.signUp(body: ["username": "x"], auth: .anonymous, on: db) }
        await XCTAssertParseError(201) { try await users.signUp(body: ["username": "x", "password": ""], auth: .anonymous, on: db) }
        await XCTAssertParseError(125) { try await h.signUp("carol", email: "not-an-email") }
        await XCTAssertParseError(119) { try await users.signUp(body: ["username": "x", "password": "p", "emailVerified": true], auth: .anonymous, on: db) }
        await XCTAssertParseError(111) { try await h.signUp("dave", fields: ["age": "thirty"]) }
        await XCTAssertParseError(105) { try await h.signUp("erin", fields: ["sessionToken": "r:x"]) }

        let login = try parsed(try await users.logIn(username: "Alice", email: nil, password: "secret", installationId: "inst-1", on: db))
        XCTAssertEqual(login["objectId"], .string(alice.objectId))
        XCTAssertEqual(login["screenName"], "Al")
        XCTAssertEqual(login["email"], "alice@example.com")
        XCTAssertNil(login["password"])
        let token = try XCTUnwrap(login["sessionToken"]?.string)
        XCTAssertTrue(SessionStore.isWellFormed(token))
        let byEmail = try parsed(try await users.logIn(username: nil, email: "alice@example.com", password: "secret", installationId: nil, on: db))
        XCTAssertEqual(byEmail["objectId"], .string(alice.objectId))
        let emailAsUsername = try parsed(try await users.logIn(username: "alice@example.com", email: nil, password: "secret", installationId: nil, on: db))
        XCTAssertEqual(emailAsUsername["objectId"], .string(alice.objectId))

        await XCTAssertParseError(101) { try await users.logIn(username: "Alice", email: nil, password: "wrong", installationId: nil, on: db) }
        await XCTAssertParseError(101) { try await users.logIn(username: "nobody", email: nil, password: "secret", installationId: nil, on: db) }
        await XCTAssertParseError(200) { try await users.logIn(username: nil, email: nil, password: "secret", installationId: nil, on: db) }
        await XCTAssertParseError(201) { try await users.logIn(username: "Alice", email: nil, password: nil, installationId: nil, on: db) }

        let session = try await h.accounts.sessions.lookup(token, on: db)
        XCTAssertEqual(session.userId, alice.objectId)
        XCTAssertEqual(session.installationId, "inst-1")
        let me = try parsed(try await users.me(session: session, on: db))
        XCTAssertEqual(me["username"], "Alice")
        XCTAssertEqual(me["sessionToken"], .string(token))
        XCTAssertEqual(me["ACL"]?["*"], ["read": true])
        XCTAssertEqual(me["ACL"]?[alice.objectId], ["read": true, "write": true])

        // Another user sees Alice without her email.
        let bob = try await h.signUp("bob")
        let seen = try parsed(try await users.get(objectId: alice.objectId, auth: h.auth(bob), on: db))
        XCTAssertEqual(seen["username"], "Alice")
        XCTAssertNil(seen["email"])
        let master = try parsed(try await users.get(objectId: alice.objectId, auth: .master, on: db))
        XCTAssertEqual(master["email"], "alice@example.com")
        await h.shutdown()
    }

    func testUpdateRulesPasswordChangeAndDelete() async throws {
        let h = try await AccountsHarness(prefix: "userupd")
        let users = h.accounts.users, sessions = h.accounts.sessions, db = h.client
        let alice = try await h.signUp("alice", password: "one")
        let bob = try await h.signUp("bob")
        await XCTAssertParseError(206) { try await users.update(objectId: alice.objectId, body: ["age": 3], auth: h.auth(bob), on: db) }
        await XCTAssertParseError(206) { try await users.update(objectId: alice.objectId, body: ["age": 3], auth: .anonymous, on: db) }
        await XCTAssertParseError(202) { try await users.update(objectId: alice.objectId, body: ["username": "BOB"], auth: h.auth(alice), on: db) }

        let updated = try await users.update(objectId: alice.objectId, body: ["age": 3, "visits": ["__op": "Increment"]], auth: h.auth(alice), on: db)
        XCTAssertNotNil(updated["updatedAt"])
        XCTAssertEqual(updated["visits"]?.int, 1)

        // Second login, then a password change from the first session revokes only the second.
        let other = try parsed(try await users.logIn(username: "alice", email: nil, password: "one", installationId: nil, on: db))
        let otherToken = try XCTUnwrap(other["sessionToken"]?.string)
        _ = try await users.update(objectId: alice.objectId, body: ["password": "two"], auth: h.auth(alice), on: db)
        await XCTAssertParseError(209) { try await sessions.lookup(otherToken, on: db) }
        let current = try await sessions.lookup(alice.session!.token, on: db)
        XCTAssertEqual(current.userId, alice.objectId)
        await XCTAssertParseError(101) { try await users.logIn(username: "alice", email: nil, password: "one", installationId: nil, on: db) }
        _ = try await users.logIn(username: "alice", email: nil, password: "two", installationId: nil, on: db)

        await XCTAssertParseError(206) { try await users.delete(objectId: alice.objectId, auth: h.auth(bob), on: db) }
        await XCTAssertParseError(206) { try await users.delete(objectId: alice.objectId, auth: .anonymous, on: db) }
        try await users.delete(objectId: alice.objectId, auth: h.auth(alice), on: db)
        await XCTAssertParseError(209) { try await sessions.lookup(alice.session!.token, on: db) }
        await XCTAssertParseError(101) { try await users.get(objectId: alice.objectId, auth: .master, on: db) }
        await XCTAssertParseError(101) { try await users.delete(objectId: alice.objectId, auth: .master, on: db) }
        await h.shutdown()
    }

    func testBanRevokesAndBlocksLoginAndLockout() async throws {
        let h = try await AccountsHarness(prefix: "ban", configuration: AccountsConfiguration(lockoutThreshold: 2, lockoutMinutes: 1, passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        let users = h.accounts.users, sessions = h.accounts.sessions, db = h.client
        let mallory = try await h.signUp("mallory")
        let revoked = try await users.setBanned(objectId: mallory.objectId, banned: true, on: db)
        XCTAssertEqual(revoked, 1)
        await XCTAssertParseError(209) { try await sessions.lookup(mallory.session!.token, on: db) }
        await XCTAssertParseError(101) { try await users.logIn(username: "mallory", email: nil, password: "pw", installationId: nil, on: db) }
        try await users.setBanned(objectId: mallory.objectId, banned: false, on: db)
        _ = try await users.logIn(username: "mallory", email: nil, password: "pw", installationId: nil, on: db)

        // Lockout: two failures lock; the third attempt (even with the right password) is refused.
        _ = try await h.signUp("victim")
        for _ in 0..<2 {
            await XCTAssertParseError(101) { try await users.logIn(username: "victim", email: nil, password: "bad", installationId: nil, on: db) }
        }
        let locked = await Result { () async throws(ParseError) -> [UInt8] in
            try await users.logIn(username: "victim", email: nil, password: "pw", installationId: nil, on: db)
        }
        XCTAssertEqual(locked.failure?.code, 101)
        XCTAssertTrue(locked.failure?.message.contains("locked") == true, "\(locked)")
        // After the lock expires the count starts afresh and the right password works.
        try await h.client.query("UPDATE users SET locked_until = now() - interval '1 second' WHERE username = 'victim'")
        _ = try await users.logIn(username: "victim", email: nil, password: "pw", installationId: nil, on: db)
        await h.shutdown()
    }

    func testSessionsListRevokeAndExpiry() async throws {
        let h = try await AccountsHarness(prefix: "sess")
        let sessions = h.accounts.sessions, db = h.client
        let alice = try await h.signUp("alice")
        let bob = try await h.signUp("bob")
        let list = try parsedResults(try await sessions.list(userId: alice.objectId, limit: 100, skip: 0, on: db))
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(list[0]["createdWith"], ["action": "signup", "authProvider": "password"])
        XCTAssertEqual(list[0]["expiresAt"]?["__type"], "Date")
        XCTAssertEqual(list[0]["user"]?["objectId"], .string(alice.objectId))
        await XCTAssertParseError(101) { try await sessions.revoke(sessionId: alice.session!.sessionId, auth: h.auth(bob), on: db) }
        try await sessions.revoke(sessionId: alice.session!.sessionId, auth: h.auth(alice), on: db)
        await XCTAssertParseError(209) { try await sessions.lookup(alice.session!.token, on: db) }

        // Expired: set in the past, drop the cached copy.
        _ = try await h.client.query("UPDATE sessions SET expires_at = now() - interval '1 minute' WHERE token = $1", [.text(bob.session!.token)])
        sessions.cache.invalidate(token: bob.session!.token)
        let bobToken = bob.session!.token
        let expired = await Result { () async throws(ParseError) -> SessionInfo in try await sessions.lookup(bobToken, on: db) }
        XCTAssertEqual(expired.failure, .invalidSessionToken("Session token is expired."))
        await XCTAssertParseError(209) { try await sessions.lookup("r:00000000000000000000000000000000", on: db) }
        await XCTAssertParseError(209) { try await sessions.lookup("garbage", on: db) }
        await h.shutdown()
    }
}
