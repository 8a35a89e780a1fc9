import Foundation
import XCTest

/// Relation fields on `_User` and `_Installation` over HTTP and PostgreSQL: `AddRelation` and
/// `RemoveRelation` on their updates, the `Relation` member in their reads, `$relatedTo` and
/// relation equality on them, the join rows going with the owner, and the ACL/session rules of
/// their own stores still deciding who may write.
final class SystemClassRelationTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    private func ids(_ reply: ParseHarness.Reply) -> [String] {
        ((reply["results"] as? [[String: Any]]) ?? []).compactMap { $0["objectId"] as? String }.sorted()
    }

    func testUserAndInstallationRelationsAreWrittenReadQueriedAndCleanedUp() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob"), carol = try h.signUp("carol")
        let add = ["__op": "AddRelation", "objects": [pointer("_User", bob.id), pointer("_User", carol.id)]] as [String: Any]
        let updated = try h.call("PUT", "/parse/users/\(alice.id)", body: ["friends": add], token: alice.token)
        XCTAssertEqual(updated.status, 200, "\(updated.json ?? "")")
        let fetched = try h.call("GET", "/parse/users/\(alice.id)", token: alice.token)
        XCTAssertEqual(fetched["friends"] as? [String: String], ["__type": "Relation", "className": "_User"])
        let related: [String: Any] = ["$relatedTo": ["object": pointer("_User", alice.id), "key": "friends"]]
        XCTAssertEqual(ids(try h.call("GET", "/parse/users" + query(["where": jsonText(related)]))), [bob.id, carol.id].sorted())
        XCTAssertEqual(ids(try h.call("GET", "/parse/users" + query(["where": jsonText(["friends": pointer("_User", carol.id)])]))), [alice.id],
                       "users whose friends hold carol")
        let found = (try h.call("GET", "/parse/users" + query(["where": jsonText(["username": "alice"])]))["results"] as? [[String: Any]])?.first
        XCTAssertEqual(found?["friends"] as? [String: String], ["__type": "Relation", "className": "_User"], "in finds too")
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["friends": ["__op": "RemoveRelation", "objects": [pointer("_User", bob.id)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(ids(try h.call("GET", "/parse/users" + query(["where": jsonText(related)]))), [carol.id])
        // Another user's relations are not anyone else's to change (Parse: users update only themselves).
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["friends": add], token: bob.token).code, 206)
        XCTAssertEqual(ids(try h.call("GET", "/parse/users" + query(["where": jsonText(related)]))), [carol.id], "the refused write changed nothing")
        let wrongClass = try h.call("PUT", "/parse/users/\(alice.id)", body: ["friends": ["__op": "AddRelation", "objects": [pointer("Post", "x")]]],
                                    token: alice.token)
        XCTAssertEqual(wrongClass.code, 111, "\(wrongClass.json ?? "")")
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["friends": ["__op": "AddRelation", "objects": ["x"]]], token: alice.token).code, 106)

        // Installations: the master key relates devices to a group object.
        let installation = try XCTUnwrap(try h.call("POST", "/parse/installations", body: ["installationId": "i-1", "deviceType": "ios"],
                                                    token: alice.token)["objectId"] as? String)
        let group = try XCTUnwrap(try h.call("POST", "/parse/classes/Group", body: ["name": "g"])["objectId"] as? String)
        XCTAssertEqual(try h.call("PUT", "/parse/installations/\(installation)", body: ["groups": ["__op": "AddRelation", "objects": [pointer("Group", group)]]],
                                  token: alice.token).status, 200)
        let device = try h.call("GET", "/parse/installations/\(installation)", token: alice.token)
        XCTAssertEqual(device["groups"] as? [String: String], ["__type": "Relation", "className": "Group"])
        let groups = try h.call("GET", "/parse/classes/Group" + query(["where": jsonText(["$relatedTo": ["object": pointer("_Installation", installation), "key": "groups"]])]))
        XCTAssertEqual(ids(groups), [group])

        // Deleting the owners deletes their join rows.
        XCTAssertEqual(try h.call("DELETE", "/parse/users/\(alice.id)", token: alice.token).status, 200)
        XCTAssertEqual(ids(try h.call("GET", "/parse/users" + query(["where": jsonText(related)]), master: true)), [])
        XCTAssertEqual(try h.call("DELETE", "/parse/installations/\(installation)", master: true).status, 200)
        XCTAssertEqual(ids(try h.call("GET", "/parse/classes/Group" + query(["where": jsonText(["$relatedTo": ["object": pointer("_Installation", installation), "key": "groups"]])]))), [])
        await h.shutdown()
    }
}
