import Foundation
import ParleyAccounts
import ParleyPostgres
import XCTest

/// `/schemas` over HTTP and PostgreSQL, as Parse Server's `SchemasRouter` on PostgreSQL: master
/// key only, classes with fields, options, permissions and real indexes, each of Parse's errors,
/// and a change on one node reaching another's cache.
final class SchemasTests: XCTestCase {
    func testOnlyTheMasterKeyReadsOrChangesSchemas() async throws {
        let h = try await ParseHarness()
        let user = try h.signUp("mallory")
        for token in [nil, user.token] {
            for (method, path) in [("GET", "/parse/schemas"), ("GET", "/parse/schemas/_User"), ("POST", "/parse/schemas/Evil"),
                                   ("PUT", "/parse/schemas/_User"), ("DELETE", "/parse/schemas/_User")] {
                let refused = try h.call(method, path, body: method == "GET" || method == "DELETE" ? nil : ["fields": ["x": ["type": "String"]]], token: token)
                XCTAssertEqual(refused.status, 403, "\(method) \(path)")
                XCTAssertEqual(refused["error"] as? String, "unauthorized: master key is required")
            }
        }
        let batched = try h.call("POST", "/parse/batch", body: ["requests": [["method": "POST", "path": "/parse/schemas/Evil", "body": [:]]]], token: user.token)
        XCTAssertEqual(batched.status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/schemas/Evil", master: true).code, 103, "not created through batch either")
        await h.shutdown()
    }

    func testCreateReadUpdateAndDropAClassWithFieldsOptionsAndIndexes() async throws {
        let h = try await ParseHarness(allowClientClassCreation: false)
        let created = try h.call("POST", "/parse/schemas/Game", body: [
            "className": "Game",
            "fields": ["score": ["type": "Number"], "owner": ["type": "Pointer", "targetClass": "_User"], "fans": ["type": "Relation", "targetClass": "_User"],
                       "title": ["type": "String", "required": true], "level": ["type": "Number", "defaultValue": 1]],
            "indexes": ["score_1": ["score": 1], "owner_title": ["owner": 1, "title": -1]],
        ], master: true)
        XCTAssertEqual(created.status, 200, "\(created.json ?? "")")
        XCTAssertEqual(created["className"] as? String, "Game")
        let fields = try XCTUnwrap(created["fields"] as? [String: [String: Any]])
        XCTAssertEqual(fields["objectId"]?["type"] as? String, "String")
        XCTAssertEqual(fields["ACL"]?["type"] as? String, "ACL")
        XCTAssertEqual(fields["owner"]?["targetClass"] as? String, "_User")
        XCTAssertEqual(fields["fans"]?["type"] as? String, "Relation")
        XCTAssertEqual(fields["title"]?["required"] as? Bool, true)
        XCTAssertEqual(fields["level"]?["defaultValue"] as? Int, 1)
        let permissions = try XCTUnwrap(created["classLevelPermissions"] as? [String: Any])
        XCTAssertEqual(permissions["find"] as? [String: Bool], ["*": true], "Parse's defaults")
        XCTAssertEqual(permissions["protectedFields"] as? [String: [String]], ["*": []])
        let indexes = try XCTUnwrap(created["indexes"] as? [String: [String: Int]])
        XCTAssertEqual(indexes["_id_"], ["_id": 1])
        XCTAssertEqual(indexes["score_1"], ["score": 1])
        let made = try await indexDefinitions(h, "Game")
        XCTAssertEqual(made.count, 2, "real indexes on objects: \(made)")

        // Fields' options apply to writes: the default fills in, the required field must be set.
        let missing = try h.call("POST", "/parse/classes/Game", body: ["score": 3], master: true)
        XCTAssertEqual(missing.code, 142, "\(missing.json ?? "")")
        XCTAssertEqual(missing["error"] as? String, "title is required")
        let game = try XCTUnwrap(try h.call("POST", "/parse/classes/Game", body: ["score": 3, "title": "chess"], master: true)["objectId"] as? String)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Game/\(game)", master: true)["level"] as? Int, 1)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["title": ["__op": "Delete"]], master: true).code, 142)

        // Parse's errors, each with its code.
        func code(_ method: String, _ path: String, _ body: [String: Any]) throws -> Int? { try h.call(method, path, body: body, master: true).code }
        XCTAssertEqual(try code("POST", "/parse/schemas/Game", [:]), 103, "exists")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Game", master: true)["error"] as? String, "Class Game already exists.")
        XCTAssertEqual(try code("POST", "/parse/schemas/Foo", ["className": "Bar"]), 103, "mismatch")
        XCTAssertEqual(try code("POST", "/parse/schemas", [:]), 135, "no class name")
        XCTAssertEqual(try code("POST", "/parse/schemas", ["className": "1bad"]), 103, "invalid class name")
        XCTAssertEqual(try code("POST", "/parse/schemas/" + String(repeating: "n", count: 200), [:]), 103, "oversized class name")
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["bad-name": ["type": "String"]]]), 105)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": [String(repeating: "f", count: 200): ["type": "String"]]]), 105, "oversized field name")
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["objectId": ["type": "String"]]]), 136)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "Wat"]]]), 111)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "Pointer"]]]), 135)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "Pointer", "targetClass": "9x"]]]), 103)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "Number", "defaultValue": "one"]]]), 111)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "GeoPoint"], "y": ["type": "GeoPoint"]]]), 111)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": "String"]]), 107)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["fields": ["x": ["type": "Relation", "targetClass": "_User", "required": true]]]), 111)
        XCTAssertEqual(try code("POST", "/parse/schemas/A", ["indexes": ["i": ["nope": 1]]]), 102, "index on a missing field")
        XCTAssertEqual(try h.call("GET", "/parse/schemas/A", master: true).code, 103, "nothing was left of the refused creates")
        XCTAssertEqual(try h.call("GET", "/parse/schemas/Missing", master: true)["error"] as? String, "Class Missing does not exist.")
        XCTAssertEqual(try code("PUT", "/parse/schemas/Missing", ["fields": [:]]), 103)
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["fields": ["score": ["type": "String"]]]), 255, "type change")
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["fields": ["nope": ["__op": "Delete"]]]), 255)
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["fields": ["createdAt": ["__op": "Delete"]]]), 136, "a default field")
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["indexes": ["score_1": ["score": 1]]]), 102, "index exists")
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["indexes": ["nope": ["__op": "Delete"]]]), 102)
        XCTAssertEqual(try code("PUT", "/parse/schemas/Game", ["indexes": ["_id_": ["__op": "Delete"]]]), 102)

        // Deleting a field drops its values and its index goes with a delete of the index.
        let changed = try h.call("PUT", "/parse/schemas/Game", body: [
            "fields": ["score": ["__op": "Delete"], "rank": ["type": "Number"]],
            "indexes": ["score_1": ["__op": "Delete"]],
        ], master: true)
        XCTAssertEqual(changed.status, 200, "\(changed.json ?? "")")
        let changedFields = try XCTUnwrap(changed["fields"] as? [String: Any])
        XCTAssertNil(changedFields["score"])
        XCTAssertNotNil(changedFields["rank"])
        XCTAssertNil((changed["indexes"] as? [String: Any])?["score_1"])
        let left = try await indexDefinitions(h, "Game")
        XCTAssertEqual(left.count, 1, "\(left)")
        XCTAssertNil(try h.call("GET", "/parse/classes/Game/\(game)", master: true)["score"], "the values went with the field")
        // The field may come back with another type.
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/Game", body: ["fields": ["score": ["type": "String"]]], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Game/\(game)", body: ["score": "high"], master: true).status, 200)

        let all = try XCTUnwrap(try h.call("GET", "/parse/schemas", master: true)["results"] as? [[String: Any]])
        let names = all.compactMap { $0["className"] as? String }
        XCTAssertTrue(Set(["_User", "_Role", "_Session", "_Installation", "Game"]).isSubset(of: Set(names)), "\(names)")

        // A class with objects stays; an empty one goes, with its indexes.
        let full = try h.call("DELETE", "/parse/schemas/Game", master: true)
        XCTAssertEqual(full.code, 255)
        XCTAssertEqual(full["error"] as? String, "Class Game is not empty, contains 1 objects, cannot drop schema.")
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Game/\(game)", master: true).status, 200)
        let dropped = try h.call("DELETE", "/parse/schemas/Game", master: true)
        XCTAssertEqual(dropped.status, 200)
        XCTAssertEqual(dropped.json as? [String: Int], [:])
        XCTAssertEqual(try h.call("GET", "/parse/schemas/Game", master: true).code, 103)
        let gone = try await indexDefinitions(h, "Game")
        XCTAssertEqual(gone.count, 0, "\(gone)")
        XCTAssertEqual(try h.call("DELETE", "/parse/schemas/NeverExisted", master: true).status, 200, "as Parse Server")
        XCTAssertEqual(try h.call("DELETE", "/parse/schemas/1bad", master: true).code, 103)
        await h.shutdown()
    }

    func testMalformedPermissionsAndTooManyFieldsAreRefused() async throws {
        let h = try await ParseHarness()
        XCTAssertEqual(try h.call("POST", "/parse/schemas/C", body: ["fields": ["owner": ["type": "Pointer", "targetClass": "_User"]]], master: true).status, 200)
        for permissions: Any in [["find": ["*": "yes"]], ["bogus": [:]], "everyone", ["find": "all"], ["find": ["not-a-key!": true]],
                                 ["readUserFields": ["nope"]], ["readUserFields": "owner"], ["find": ["pointerFields": ["missing"]]],
                                 ["protectedFields": ["*": ["missing"]]], ["protectedFields": ["*": ["objectId"]]], ["protectedFields": ["*": "owner"]]] {
            let refused = try h.call("PUT", "/parse/schemas/C", body: ["classLevelPermissions": permissions], master: true)
            XCTAssertEqual(refused.code, 107, "\(permissions): \(refused.json ?? "")")
        }
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/C", master: true, rawBody: #"{"classLevelPermissions":{"find":"#).code, 107)
        let valid = try h.call("PUT", "/parse/schemas/C", body: ["classLevelPermissions": ["find": ["requiresAuthentication": true, "role:Admins": true],
                                                                                             "readUserFields": ["owner"]]], master: true)
        XCTAssertEqual(valid.status, 200, "\(valid.json ?? "")")
        let stored = try XCTUnwrap(valid["classLevelPermissions"] as? [String: Any])
        XCTAssertEqual(stored["get"] as? [String: Bool], [:], "an operation left out is locked, as Parse Server on PostgreSQL")
        XCTAssertEqual(stored["readUserFields"] as? [String], ["owner"])

        var many: [String: Any] = [:]
        for index in 0...1000 { many["f\(index)"] = ["type": "String"] }
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Wide", body: ["fields": many], master: true).code, 116, "1,001 fields")
        many.removeValue(forKey: "f1000")
        let wide = try h.call("POST", "/parse/schemas/Wide", body: ["fields": many], master: true)
        XCTAssertEqual(wide.status, 200, "1,000 fields")
        XCTAssertEqual((wide["fields"] as? [String: Any])?.count, 1004)
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/Wide", body: ["fields": ["one_more": ["type": "String"]]], master: true).code, 116)
        XCTAssertEqual(try h.call("GET", "/parse/health").status, 200, "still serving")
        await h.shutdown()
    }

    func testASchemaChangeOnOneNodeReachesTheOtherNodesCache() async throws {
        let h = try await ParseHarness()
        try await h.listenForAccountEvents()
        let user = try h.signUp("alice")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Note", body: ["fields": ["text": ["type": "String"]]], master: true).status, 200)
        XCTAssertEqual(try h.call("POST", "/parse/classes/Note", body: ["text": "hi"], token: user.token).status, 201)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note", token: user.token).status, 200, "permissions cached on this node")

        // Another node (its own caches, same database) locks the class.
        let other = Accounts(database: h.database, blockingPool: h.pool,
                             configuration: AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        _ = try await other.schemaEditor.update("Note", body: ["classLevelPermissions": ["create": ["*": true], "addField": ["*": true]]])
        let deadline = ContinuousClock.now + .seconds(20)
        while try h.call("GET", "/parse/classes/Note", token: user.token).status == 200 {
            guard ContinuousClock.now < deadline else { return XCTFail("the schema change never reached this node") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let refused = try h.call("GET", "/parse/classes/Note", token: user.token)
        XCTAssertEqual(refused.code, 119)
        XCTAssertEqual(refused["error"] as? String, "Permission denied for action find on class Note.")
        // A field deleted elsewhere may come back here with another type.
        _ = try await other.schemaEditor.update("Note", body: ["fields": ["text": ["__op": "Delete"]]])
        var reply = try h.call("POST", "/parse/classes/Note", body: ["text": 5], token: user.token)
        while reply.status != 201 {
            guard ContinuousClock.now < deadline else { return XCTFail("the field deletion never reached this node: \(reply.json ?? "")") }
            try await Task.sleep(for: .milliseconds(10))
            reply = try h.call("POST", "/parse/classes/Note", body: ["text": 5], token: user.token)
        }
        await h.shutdown()
    }

    private func indexDefinitions(_ h: ParseHarness, _ className: String) async throws -> [String] {
        let rows = try await h.database.query("SELECT indexdef FROM pg_indexes WHERE tablename = 'objects' AND indexdef LIKE $1",
                                              [.text("%class_name = '\(className)'::text%")])
        return rows.compactMap { $0[0].text }
    }
}
