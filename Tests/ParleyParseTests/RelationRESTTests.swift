import Foundation
import ParleyAccounts
import XCTest

/// Relations over HTTP and PostgreSQL: `AddRelation`/`RemoveRelation`/`Batch` on any class, the
/// `Relation` value in answers, `$relatedTo`, querying owners by a relation, join rows cleaned
/// up with their owner, the join table and its index, Parse's type errors, and the abuse cases.
final class RelationRESTTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    private func ids(_ reply: ParseHarness.Reply, file: StaticString = #filePath, line: UInt = #line) -> Set<String> {
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")", file: file, line: line)
        return Set((reply["results"] as? [[String: Any]] ?? []).compactMap { $0["objectId"] as? String })
    }

    private func joinRows(_ h: ParseHarness, _ table: String, owner: String) async throws -> Int {
        let rows = try await h.database.query("SELECT count(*)::int AS n FROM \"\(table)\" WHERE \"owningId\" = $1", [.text(owner)])
        return rows.first?["n"].int ?? -1
    }

    func testAddRemoveRelatedToQueryByRelationAndDelete() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        func create(_ className: String, _ body: [String: Any], token: String) throws -> String {
            let answer = try h.call("POST", "/parse/classes/\(className)", body: body, token: token)
            XCTAssertEqual(answer.status, 201, "\(answer.json ?? "")")
            return try XCTUnwrap(answer["objectId"] as? String)
        }
        let owned: [String: Any] = ["*": ["read": true], alice.id: ["read": true, "write": true]]
        let scores = try (0..<4).map { try create("Score", ["points": $0, "ACL": owned], token: alice.token) }
        let privateScore = try create("Score", ["points": 99, "ACL": [alice.id: ["read": true, "write": true]]], token: alice.token)
        // AddRelation in a create.
        let game = try create("Game", ["name": "g", "ACL": owned,
                                       "scores": ["__op": "AddRelation", "objects": [pointer("Score", scores[0]), pointer("Score", scores[1])]]],
                              token: alice.token)
        let fetched = try h.call("GET", "/parse/classes/Game/\(game)", token: bob.token)
        XCTAssertEqual(fetched["scores"] as? [String: String], ["__type": "Relation", "className": "Score"], "\(fetched.json ?? "")")
        let relatedTo: (String) -> String = { owner in
            "/parse/classes/Score" + query(["where": jsonText(["$relatedTo": ["object": ["__type": "Pointer", "className": "Game", "objectId": owner], "key": "scores"]])])
        }
        XCTAssertEqual(ids(try h.call("GET", relatedTo(game), token: bob.token)), [scores[0], scores[1]])

        // AddRelation and RemoveRelation in updates, and the JS SDK's Batch of both.
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["scores": ["__op": "AddRelation", "objects": [pointer("Score", scores[2]), pointer("Score", privateScore)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(ids(try h.call("GET", relatedTo(game), token: alice.token)), [scores[0], scores[1], scores[2], privateScore])
        XCTAssertEqual(ids(try h.call("GET", relatedTo(game), token: bob.token)), [scores[0], scores[1], scores[2]], "related objects are filtered by their ACL")
        let batch: [String: Any] = ["__op": "Batch", "ops": [["__op": "AddRelation", "objects": [pointer("Score", scores[3])]],
                                                            ["__op": "RemoveRelation", "objects": [pointer("Score", scores[0])]]]]
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["scores": batch], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["scores": ["__op": "RemoveRelation", "objects": [pointer("Score", privateScore)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(ids(try h.call("GET", relatedTo(game), token: alice.token)), [scores[1], scores[2], scores[3]])
        // The POST form, a count, and $relatedTo with other constraints.
        let counted = try h.call("POST", "/parse/classes/Score", body: ["_method": "GET", "count": 1, "limit": 0,
                                                                       "where": ["$relatedTo": ["object": pointer("Game", game), "key": "scores"], "points": ["$gte": 2]]],
                                 token: alice.token)
        XCTAssertEqual(counted["count"] as? Int, 2, "\(counted.json ?? "")")

        // Every object of the class answers its Relation fields, as Parse Server on PostgreSQL.
        let plain = try create("Game", ["name": "plain"], token: alice.token)
        let relation: [String: String] = ["__type": "Relation", "className": "Score"]
        XCTAssertEqual(try h.call("GET", "/parse/classes/Game/\(plain)", token: bob.token)["scores"] as? [String: String], relation)
        let found = try h.call("GET", "/parse/classes/Game" + query(["where": jsonText(["objectId": plain])]), token: bob.token)
        XCTAssertEqual((found["results"] as? [[String: Any]])?.first?["scores"] as? [String: String], relation, "\(found.json ?? "")")
        let selected = try h.call("GET", "/parse/classes/Game" + query(["where": jsonText(["objectId": plain]), "keys": "name"]), token: bob.token)
        XCTAssertNil((selected["results"] as? [[String: Any]])?.first?["scores"], "keys leaves it out")

        // Querying owners by a relation: games whose `scores` holds scores[2].
        let other = try create("Game", ["name": "other", "ACL": owned, "scores": ["__op": "AddRelation", "objects": [pointer("Score", scores[3])]]], token: alice.token)
        let byRelation = "/parse/classes/Game" + query(["where": jsonText(["scores": pointer("Score", scores[2])])])
        XCTAssertEqual(ids(try h.call("GET", byRelation, token: bob.token)), [game])
        XCTAssertEqual(ids(try h.call("GET", "/parse/classes/Game" + query(["where": jsonText(["scores": pointer("Score", scores[3])])]), token: bob.token)), [game, other])
        XCTAssertEqual(ids(try h.call("GET", "/parse/classes/Game" + query(["where": jsonText(["scores": pointer("Score", "nothing")])]), token: bob.token)), [])

        // The join table is Parse Server's, indexed on owningId.
        let indexes = try await h.database.query("SELECT indexdef FROM pg_indexes WHERE tablename = $1", [.text("_Join:scores:Game")])
        XCTAssertTrue(indexes.contains { ($0["indexdef"].string ?? "").contains("(\"owningId\")") }, "\(indexes.map { $0["indexdef"].string ?? "" })")
        var rows = try await joinRows(h, "_Join:scores:Game", owner: game)
        XCTAssertEqual(rows, 3)

        // Deleting the owner deletes its join rows, not the other owner's.
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Game/\(game)", token: alice.token).status, 200)
        rows = try await joinRows(h, "_Join:scores:Game", owner: game)
        XCTAssertEqual(rows, 0)
        rows = try await joinRows(h, "_Join:scores:Game", owner: other)
        XCTAssertEqual(rows, 1)
        XCTAssertEqual(ids(try h.call("GET", relatedTo(game), token: alice.token)), [])
        await h.shutdown()
    }

    func testRelationTypeErrorsAndAbuse() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let owned: [String: Any] = ["*": ["read": true], alice.id: ["read": true, "write": true]]
        let score = try XCTUnwrap(try h.call("POST", "/parse/classes/Score", body: ["points": 1], token: alice.token)["objectId"] as? String)
        let game = try XCTUnwrap(try h.call("POST", "/parse/classes/Game", body: ["name": "g", "ACL": owned,
                                                                               "scores": ["__op": "AddRelation", "objects": [pointer("Score", score)]]],
                                            token: alice.token)["objectId"] as? String)
        func put(_ body: [String: Any], token: String? = nil) throws -> ParseHarness.Reply {
            try h.call("PUT", "/parse/classes/Game/\(game)", body: body, token: token ?? alice.token)
        }
        // Parse's codes: another class than the relation's (111), mixed classes (111), not
        // pointers (106), a relation op on a field of another type (111), too many (107).
        XCTAssertEqual(try put(["scores": ["__op": "AddRelation", "objects": [pointer("Game", game)]]]).code, 111)
        XCTAssertEqual(try put(["other": ["__op": "AddRelation", "objects": [pointer("Score", score), pointer("Game", game)]]]).code, 111)
        XCTAssertEqual(try put(["scores": ["__op": "AddRelation", "objects": ["nope"]]]).code, 106)
        XCTAssertEqual(try put(["scores": ["__op": "AddRelation", "objects": "nope"]]).code, 107)
        XCTAssertEqual(try put(["name": ["__op": "AddRelation", "objects": [pointer("Score", score)]]]).code, 111)
        XCTAssertEqual(try put(["scores": "text"]).code, 111, "a Relation field cannot become a String")
        let flood = Array(repeating: pointer("Score", score), count: FieldOperation.maxObjects + 1)
        XCTAssertEqual(try put(["scores": ["__op": "AddRelation", "objects": flood]]).code, 107)
        XCTAssertEqual(try put(["scores": ["__op": "Batch", "ops": [["__op": "Increment"]]]]).code, 111)
        XCTAssertEqual(try put([String(repeating: "f", count: 60): ["__op": "AddRelation", "objects": [pointer("Score", score)]]]).code, 105)
        // Another user, and nobody, cannot change the relation of an object they cannot write.
        let bobsScore = try XCTUnwrap(try h.call("POST", "/parse/classes/Score", body: ["points": 2], token: bob.token)["objectId"] as? String)
        XCTAssertEqual(try put(["scores": ["__op": "AddRelation", "objects": [pointer("Score", bobsScore)]]], token: bob.token).code, 101)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["scores": ["__op": "RemoveRelation", "objects": [pointer("Score", score)]]]).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Game/\(game)", token: bob.token).code, 101)
        let rows = try await h.database.query("SELECT \"relatedId\" FROM \"_Join:scores:Game\" WHERE \"owningId\" = $1", [.text(game)])
        XCTAssertEqual(rows.map { $0["relatedId"].string ?? "" }, [score], "failed writes changed nothing")
        // A relation whose targets the reader cannot read: $relatedTo finds none of them.
        let hiddenGame = try XCTUnwrap(try h.call("POST", "/parse/classes/Game", body: [
            "ACL": [alice.id: ["read": true, "write": true]],
            "scores": ["__op": "AddRelation", "objects": [pointer("Score", bobsScore)]]], token: alice.token)["objectId"] as? String)
        let secretScore = try XCTUnwrap(try h.call("POST", "/parse/classes/Score", body: ["points": 3, "ACL": [alice.id: ["read": true]]], token: alice.token)["objectId"] as? String)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(hiddenGame)", body: ["scores": ["__op": "AddRelation", "objects": [pointer("Score", secretScore)]]],
                                  token: alice.token).status, 200)
        let relatedTo = "/parse/classes/Score" + query(["where": jsonText(["$relatedTo": ["object": pointer("Game", hiddenGame), "key": "scores"]])])
        XCTAssertEqual(ids(try h.call("GET", relatedTo, token: bob.token)), [bobsScore])
        XCTAssertEqual(ids(try h.call("GET", relatedTo)), [bobsScore])
        // $relatedTo on a relation that never existed is empty; malformed ones are 102.
        XCTAssertEqual(ids(try h.call("GET", "/parse/classes/Score" + query(["where": jsonText(["$relatedTo": ["object": pointer("Game", game), "key": "nothing"]])]))), [])
        for bad: Any in [["object": pointer("Game", game)], ["object": "x", "key": "scores"], ["object": pointer("Game", game), "key": "a\"b"],
                         ["object": pointer("Ga\"me", game), "key": "scores"], 7] {
            XCTAssertEqual(try h.call("GET", "/parse/classes/Score" + query(["where": jsonText(["$relatedTo": bad])])).code, 102, "\(bad)")
        }
        // In a transactional batch a failing later write undoes the relation change.
        let batch = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [
            ["method": "PUT", "path": "/parse/classes/Game/\(game)", "body": ["scores": ["__op": "AddRelation", "objects": [pointer("Score", bobsScore)]]]],
            ["method": "PUT", "path": "/parse/classes/Game/\(game)", "body": ["scores": 5]]]], token: alice.token)
        XCTAssertNotEqual(batch.status, 200, "\(batch.json ?? "")")
        let after = try await h.database.query("SELECT count(*)::int AS n FROM \"_Join:scores:Game\" WHERE \"owningId\" = $1", [.text(game)])
        XCTAssertEqual(after.first?["n"].int, 1)
        await h.shutdown()
    }
}
