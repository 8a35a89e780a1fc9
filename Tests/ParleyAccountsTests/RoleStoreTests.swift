import ParleyAccounts
import ParleyPostgres
import XCTest

/// Role membership over PostgreSQL: direct roles, inherited ones in Parse Server's direction.
final class RoleStoreTests: XCTestCase {
    func testAThreeLevelHierarchyInParsesDirectionAndCycles() async throws {
        let h = try await AccountsHarness(prefix: "roles")
        let db = h.client
        func role(_ id: String, _ name: String) async throws {
            _ = try await db.query("INSERT INTO objects (class_name, object_id, data) VALUES ('_Role', $1, $2::jsonb)",
                                   [.text(id), .json(#"{"name":"\#(name)"}"#)])
        }
        func member(user: String, of roleId: String) async throws {
            _ = try await db.query(#"INSERT INTO "_Join:users:_Role" ("relatedId", "owningId") VALUES ($1, $2)"#, [.text(user), .text(roleId)])
        }
        /// `parent`'s `roles` relation contains `child`: child's users hold parent too.
        func inherits(_ parent: String, from child: String) async throws {
            _ = try await db.query(#"INSERT INTO "_Join:roles:_Role" ("relatedId", "owningId") VALUES ($1, $2)"#, [.text(child), .text(parent)])
        }
        try await role("r1", "Moderators")
        try await role("r2", "Editors")
        try await role("r3", "Readers")
        try await role("r4", "Admins")
        try await role("r5", "Unrelated")
        // Moderators inherit Editors, Editors inherit Readers (three levels).
        try await inherits("r2", from: "r1")   // Editors.roles ∋ Moderators: moderators are editors
        try await inherits("r3", from: "r2")   // Readers.roles ∋ Editors: editors are readers
        try await member(user: "alice", of: "r1")
        try await member(user: "bob", of: "r3")
        try await member(user: "carol", of: "r4")

        let roles = h.accounts.roles
        let alice = try await roles.roleNames(of: "alice", on: db)
        XCTAssertEqual(alice, ["Editors", "Moderators", "Readers"], "three levels, inherited upwards")
        let bob = try await roles.roleNames(of: "bob", on: db)
        XCTAssertEqual(bob, ["Readers"], "a member of the lowest role gains nothing above it")
        let nobody = try await roles.roleNames(of: "nobody", on: db)
        XCTAssertEqual(nobody, [])
        XCTAssertEqual(RoleStore.permissionKeys(alice), ["role:Editors", "role:Moderators", "role:Readers"])

        // A cycle ends the walk instead of looping.
        try await inherits("r1", from: "r3")
        let cyclic = try await roles.roleNames(of: "bob", on: db)
        XCTAssertEqual(cyclic, ["Editors", "Moderators", "Readers"])
        let carol = try await roles.roleNames(of: "carol", on: db)
        XCTAssertEqual(carol, ["Admins"])
        await h.shutdown()
    }
}
