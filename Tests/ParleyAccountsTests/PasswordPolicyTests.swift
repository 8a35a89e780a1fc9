@testable import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

/// Parse's passwordPolicy through the real stores and PostgreSQL.
final class PasswordPolicyTests: XCTestCase {
    func harness(_ policy: PasswordPolicy) async throws -> AccountsHarness {
        try await AccountsHarness(prefix: "policy", configuration: AccountsConfiguration(
            passwordOperationsLimit: 1, passwordMemoryLimit: 8192, passwordPolicy: policy))
    }

    func testPatternAndUsernameRulesOnSignupUpdateAndReset() async throws {
        let h = try await harness(try PasswordPolicy(validatorPattern: "^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9]).{8,}", doNotAllowUsername: true))
        defer { Task { await h.shutdown() } }
        await XCTAssertParseError(142) { try await h.signUp("alice", password: "short1A") }
        await XCTAssertParseError(142) { try await h.signUp("alice", password: "alllowercase1") }
        await XCTAssertParseError(142) { try await h.signUp("alice", password: "Xalice12345") }
        let alice = try await h.signUp("alice", password: "GoodPass1")
        let users = h.accounts.users
        // Changing the password alone checks it against the stored username.
        await XCTAssertParseError(142) { try await users.update(objectId: alice.objectId, body: ["password": "MYalice99"], auth: h.auth(alice), on: h.client) }
        await XCTAssertParseError(142) { try await users.update(objectId: alice.objectId, body: ["password": "weak"], auth: h.auth(alice), on: h.client) }
        _ = try await users.update(objectId: alice.objectId, body: ["password": "BetterPass2"], auth: h.auth(alice), on: h.client)
        await XCTAssertParseError(142) { try await users.resetPassword(objectId: alice.objectId, password: "nope", on: h.client) }
        try await users.resetPassword(objectId: alice.objectId, password: "ResetPass3", on: h.client)
        _ = try await users.logIn(username: "alice", email: nil, password: "ResetPass3", installationId: nil, on: h.client)
        // The message of a refused password is the configured one.
        let custom = try await harness(try PasswordPolicy(validatorPattern: "[0-9]", validationError: "Use a digit."))
        defer { Task { await custom.shutdown() } }
        do {
            _ = try await custom.signUp("bob", password: "nodigits")
            XCTFail("accepted")
        } catch let error as ParseError {
            XCTAssertEqual(error, .validationFailed("Use a digit."))
        }
    }

    func testHistoryRefusesRecentPasswords() async throws {
        let h = try await harness(try PasswordPolicy(maxPasswordHistory: 3))
        defer { Task { await h.shutdown() } }
        let carol = try await h.signUp("carol", password: "one")
        let users = h.accounts.users
        func change(_ password: String) async throws {
            _ = try await users.update(objectId: carol.objectId, body: ["password": .string(password)], auth: .master, on: h.client)
        }
        await XCTAssertParseError(142) { try await change("one") }
        try await change("two")
        try await change("three")
        for recent in ["one", "two", "three"] {
            await XCTAssertParseError(142) { try await change(recent) }
        }
        try await change("four")
        // "one" is now four passwords back: allowed again with a history of 3.
        try await change("one")
        let kept = try await h.client.query("SELECT count(*) AS n FROM user_password_history WHERE user_id = $1", [.text(carol.objectId)])
        XCTAssertEqual(kept.first?["n"].int, 4)
        // The history goes with the user.
        try await users.delete(objectId: carol.objectId, auth: .master, on: h.client)
        let left = try await h.client.query("SELECT count(*) AS n FROM user_password_history", [])
        XCTAssertEqual(left.first?["n"].int, 0)
    }

    func testExpiredPasswordsCannotLogIn() async throws {
        let h = try await harness(try PasswordPolicy(maxPasswordAge: .seconds(86_400)))
        defer { Task { await h.shutdown() } }
        let dave = try await h.signUp("dave", password: "pw")
        let users = h.accounts.users
        _ = try await users.logIn(username: "dave", email: nil, password: "pw", installationId: nil, on: h.client)
        try await h.client.query("UPDATE users SET password_changed_at = now() - interval '2 days' WHERE object_id = $1", [.text(dave.objectId)])
        do {
            _ = try await users.logIn(username: "dave", email: nil, password: "pw", installationId: nil, on: h.client)
            XCTFail("expired password logged in")
        } catch let error as ParseError {
            XCTAssertEqual(error, PasswordPolicy.expired)
        }
        // A wrong password is still just a wrong password (no hint that the account exists).
        await XCTAssertParseError(101) { try await users.logIn(username: "dave", email: nil, password: "bad", installationId: nil, on: h.client) }
        // A new password restarts the clock (the trigger sets password_changed_at).
        try await users.resetPassword(objectId: dave.objectId, password: "fresh", on: h.client)
        _ = try await users.logIn(username: "dave", email: nil, password: "fresh", installationId: nil, on: h.client)
    }

    func testInvalidPolicies() {
        XCTAssertThrowsError(try PasswordPolicy(validatorPattern: "(unclosed"))
        XCTAssertThrowsError(try PasswordPolicy(maxPasswordHistory: 21))
        XCTAssertThrowsError(try PasswordPolicy(resetTokenReuseIfValid: true))
        XCTAssertNoThrow(try PasswordPolicy(resetTokenValidityDuration: .seconds(3600), resetTokenReuseIfValid: true))
        XCTAssertFalse(PasswordPolicy.none.checksNewPasswords)
        XCTAssertFalse(PasswordPolicy.none.isExpired(changedAt: 0, now: .max))
    }
}
