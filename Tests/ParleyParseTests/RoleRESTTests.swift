import Foundation
import ParleyAccounts
import Synchronization
import XCTest

/// `_Role` over HTTP and PostgreSQL (`/roles`, `/classes/_Role`): a hierarchy built through REST
/// only grants `role:` ACL entries; Parse's role rules and the abuse cases.
final class RoleRESTTests: XCTestCase {
    func testAHierarchyBuiltOverRESTGrantsTheTopRoleAndRoleRulesHold() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let owned: [String: Any] = ["*": ["read": true], alice.id: ["read": true, "write": true]]
        func create(_ path: String, _ body: [String: Any], token: String? = nil) throws -> String {
            let answer = try h.call("POST", path, body: body, token: token ?? alice.token)
            XCTAssertEqual(answer.status, 201, "\(answer.json ?? "")")
            return try XCTUnwrap(answer["objectId"] as? String)
        }
        func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

        // Readers ⊇ Editors ⊇ Moderators ∋ alice (Parse: Readers.roles ∋ Editors).
        let readers = try create("/parse/roles", ["name": "Readers", "ACL": owned])
        let editors = try create("/parse/classes/_Role", ["name": "Editors", "ACL": owned])
        let moderators = try create("/parse/roles", ["name": "Moderators", "ACL": owned,
                                                     "users": ["__op": "AddRelation", "objects": [pointer("_User", alice.id)]]])
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["roles": ["__op": "AddRelation", "objects": [pointer("_Role", editors)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/_Role/\(editors)", body: ["roles": ["__op": "AddRelation", "objects": [pointer("_Role", moderators)]]],
                                  token: alice.token).status, 200)
        let created = try h.call("POST", "/parse/classes/Note", body: ["text": "for readers", "ACL": ["role:Readers": ["read": true]]], master: true)
        let note = try XCTUnwrap(created["objectId"] as? String, "\(created.json ?? "")")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).status, 200, "Readers, two levels up")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: bob.token).code, 101)
        XCTAssertEqual(try h.call("GET", "/parse/roles/\(moderators)", token: bob.token)["name"] as? String, "Moderators")
        XCTAssertEqual((try h.call("GET", "/parse/roles", token: bob.token)["results"] as? [Any])?.count, 3)

        // Another user cannot add himself to a role he cannot write; neither can nobody.
        let join: [String: Any] = ["users": ["__op": "AddRelation", "objects": [pointer("_User", bob.id)]]]
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(moderators)", body: join, token: bob.token).code, 101)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/_Role/\(readers)", body: join).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/roles/\(readers)", token: bob.token).code, 101)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: bob.token).code, 101, "bob still holds no role")

        // Parse's rules.
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["name": "Readers", "ACL": owned], token: bob.token).code, 137)
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["name": "Bad/Name", "ACL": owned]).code, 111)
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["name": 7, "ACL": owned]).code, 111)
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["ACL": owned])["error"] as? String, "name is required.")
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["name": "NoACL"])["error"] as? String, "ACL is required.")
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["name": "Other"], token: alice.token).code, 111)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["name": "Readers"], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["ACL": NSNull()], token: alice.token).code, 111)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["ACL": ["__op": "Delete"]], token: alice.token)["error"] as? String,
                       "ACL is required.")
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["users": [alice.id]], token: alice.token).code, 111)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["users": ["__op": "AddRelation", "objects": [pointer("_Role", editors)]]],
                                  token: alice.token).code, 111)
        let flood = Array(repeating: pointer("_User", bob.id), count: FieldOperation.maxObjects + 1)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(readers)", body: ["users": ["__op": "AddRelation", "objects": flood]], token: alice.token).code, 107)

        // A create whose membership write fails leaves no role behind (one transaction).
        let nul = try h.call("POST", "/parse/roles", body: ["name": "Atomic", "ACL": owned,
                                                           "users": ["__op": "AddRelation", "objects": [pointer("_User", "a\u{0}b")]]], token: alice.token)
        XCTAssertEqual(nul.code, 107, "\(nul.json ?? "")")
        _ = try create("/parse/roles", ["name": "Atomic", "ACL": owned])

        // In a transactional batch the role write joins the batch's transaction: a later failure undoes it.
        let batch = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [
            ["method": "POST", "path": "/parse/roles", "body": ["name": "Batched", "ACL": owned]],
            ["method": "POST", "path": "/parse/roles", "body": ["name": "Batched", "ACL": owned]]]], token: alice.token)
        XCTAssertNotEqual(batch.status, 200, "\(batch.json ?? "")")
        _ = try create("/parse/roles", ["name": "Batched", "ACL": owned])

        // Concurrent creates of one name: one role, the others 137 (the unique index).
        let codes = Mutex<[Int]>([])
        let (aliceId, aliceToken) = alice
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let acl: [String: Any] = [aliceId: ["read": true, "write": true]]
            let answer = try? h.call("POST", "/parse/roles", body: ["name": "Racers", "ACL": acl], token: aliceToken)
            codes.withLock { $0.append(answer?.status == 201 ? 201 : answer?.code ?? 0) }
        }
        XCTAssertEqual(codes.withLock { $0.sorted() }, [137, 137, 137, 137, 137, 137, 137, 201])

        // Removing a link (or deleting a role) revokes at once.
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(editors)", body: ["roles": ["__op": "RemoveRelation", "objects": [pointer("_Role", moderators)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).code, 101)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(editors)", body: ["roles": ["__op": "AddRelation", "objects": [pointer("_Role", moderators)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).status, 200)
        XCTAssertEqual(try h.call("DELETE", "/parse/roles/\(moderators)", token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(note)", token: alice.token).code, 101)
        await h.shutdown()
    }
}
