import Foundation
import ParleyAccounts
import ParleyPostgres
import XCTest

/// `role:Name` ACL entries over HTTP and PostgreSQL: granted through a three-level hierarchy,
/// on gets, finds, batch and writes; revoked on every node when roles change.
final class RoleACLTests: XCTestCase {
    func testRoleEntriesGrantThroughThreeLevelsAndARoleChangeReachesEveryNode() async throws {
        let h = try await ParseHarness()
        try await h.listenForAccountEvents()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let db = h.database
        for (id, name) in [("r1", "Moderators"), ("r2", "Editors"), ("r3", "Readers")] {
            _ = try await db.query("INSERT INTO objects (class_name, object_id, data) VALUES ('_Role', $1, $2::jsonb)",
                                   [.text(id), .json(#"{"name":"\#(name)"}"#)])
        }
        // Moderators' users are Editors, Editors' users are Readers (Parse: Editors.roles ∋ Moderators).
        for (child, parent) in [("r1", "r2"), ("r2", "r3")] {
            _ = try await db.query(#"INSERT INTO "_Join:roles:_Role" ("relatedId", "owningId") VALUES ($1, $2)"#, [.text(child), .text(parent)])
        }
        _ = try await db.query(#"INSERT INTO "_Join:users:_Role" ("relatedId", "owningId") VALUES ($1, 'r1')"#, [.text(alice.id)])
        // Every change to roles announces itself (alice's "no roles" from signup is cached until then).
        try await h.api.accounts.roles.rolesChanged(events: h.api.accounts.events, on: db)

        let created = try h.call("POST", "/parse/classes/Note", body: ["text": "for readers",
                                                                       "ACL": ["role:Readers": ["read": true], "role:Editors": ["write": true]]], master: true)
        let note = try XCTUnwrap(created["objectId"] as? String, "\(created.json ?? "")")
        let find = "/parse/classes/Note"

        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).status, 200, "Readers, two levels up")
        XCTAssertEqual((try h.call("GET", find, token: alice.token)["results"] as? [Any])?.count, 1)
        XCTAssertEqual((try h.call("GET", find, token: alice.token)["results"] as? [Any])?.count, 1, "the inline find, roles cached")
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Note/\(note)", body: ["text": "edited"], token: alice.token).status, 200, "Editors may write")
        let batch = try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/parse/classes/Note/\(note)"]]], token: alice.token)
        XCTAssertNotNil((batch.json as? [[String: Any]])?.first?["success"], "\(batch.json ?? "")")

        // No role, no session: nothing.
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: bob.token).code, 101)
        XCTAssertEqual((try h.call("GET", find, token: bob.token)["results"] as? [Any])?.count, 0)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Note/\(note)", body: ["text": "bob"], token: bob.token).code, 101)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)").code, 101)
        let bobBatch = try h.call("POST", "/parse/batch", body: ["requests": [["method": "DELETE", "path": "/parse/classes/Note/\(note)"]]], token: bob.token)
        XCTAssertEqual(((bobBatch.json as? [[String: Any]])?.first?["error"] as? [String: Any])?["code"] as? Int, 101)

        // Another node removes alice from Moderators and announces it: this node forgets her roles.
        let other = Accounts(database: db, blockingPool: h.pool, configuration: AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        _ = try await db.query(#"DELETE FROM "_Join:users:_Role" WHERE "relatedId" = $1"#, [.text(alice.id)])
        try await other.roles.rolesChanged(events: other.events, on: db)
        let deadline = ContinuousClock.now + .seconds(20)
        while try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).status == 200 {
            guard ContinuousClock.now < deadline else { return XCTFail("the role change never reached this node") }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual((try h.call("GET", find, token: alice.token)["results"] as? [Any])?.count, 0)
        await h.shutdown()
    }
}
