import Foundation
import Synchronization
import XCTest

/// `$inQuery`, `$notInQuery`, `$select` and `$dontSelect` over HTTP and PostgreSQL: the matches
/// Parse Server's `replaceInQuery`/`replaceSelect` give, with the subquery class's ACLs and
/// class-level permissions applied for the viewer, and the bounds and errors for bad input.
final class SubqueryRESTTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    private func names(_ h: ParseHarness, _ className: String, _ whereValue: [String: Any], token: String? = nil, master: Bool = false,
                       file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        let reply = try h.call("GET", "/parse/classes/\(className)" + query(["where": jsonText(whereValue), "order": "name"]), token: token, master: master)
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")", file: file, line: line)
        return ((reply["results"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
    }

    private func create(_ h: ParseHarness, _ className: String, _ body: [String: Any], master: Bool = false) throws -> String {
        let reply = try h.call("POST", "/parse/classes/\(className)", body: body, master: master)
        XCTAssertEqual(reply.status, 201, "\(reply.json ?? "")")
        return reply["objectId"] as? String ?? ""
    }

    func testInQueryAndSelectMatchPointersArraysAndValuesAsParse() async throws {
        let h = try await ParseHarness()
        let paris = try create(h, "Team", ["name": "PSG", "city": "Paris"])
        let lyon = try create(h, "Team", ["name": "OL", "city": "Lyon"])
        let paris2 = try create(h, "Team", ["name": "PFC", "city": "Paris"])
        _ = try create(h, "Player", ["name": "a", "team": pointer("Team", paris), "teamName": "PSG"])
        _ = try create(h, "Player", ["name": "b", "team": pointer("Team", lyon), "teamName": "OL"])
        _ = try create(h, "Player", ["name": "c", "teams": [pointer("Team", lyon), pointer("Team", paris2)], "teamNames": ["OL", "PFC"]])
        _ = try create(h, "Player", ["name": "d"])
        let inParis: [String: Any] = ["className": "Team", "where": ["city": "Paris"]]

        XCTAssertEqual(try names(h, "Player", ["team": ["$inQuery": inParis]]), ["a"])
        XCTAssertEqual(try names(h, "Player", ["teams": ["$inQuery": inParis]]), ["c"], "an array of pointers holding one")
        XCTAssertEqual(try names(h, "Player", ["team": ["$notInQuery": inParis]]), ["b", "c", "d"], "also rows without the field, as $nin")
        XCTAssertEqual(try names(h, "Player", ["team": ["$inQuery": ["className": "Team", "where": ["city": "Rome"]]]]), [])
        XCTAssertEqual(try names(h, "Player", ["$or": [["team": ["$inQuery": inParis]], ["teams": ["$inQuery": inParis]]]]), ["a", "c"])
        XCTAssertEqual(try names(h, "Player", ["team": ["$inQuery": ["className": "Other", "where": [:]]]]), [], "another class: no pointer matches")

        let select: [String: Any] = ["query": inParis, "key": "name"]
        XCTAssertEqual(try names(h, "Player", ["teamName": ["$select": select]]), ["a"])
        XCTAssertEqual(try names(h, "Player", ["teamNames": ["$select": select]]), ["c"], "an array holding it")
        XCTAssertEqual(try names(h, "Player", ["teamName": ["$dontSelect": select]]), ["b", "c", "d"])
        XCTAssertEqual(try names(h, "Player", ["teamName": ["$select": ["query": ["className": "Team"], "key": "name"]]]), ["a", "b"],
                       "no where: every team (the iOS SDK's form)")
        // A pointer selected by `objectId` against objectId, and the count.
        XCTAssertEqual(try names(h, "Team", ["objectId": ["$select": ["query": ["className": "Team", "where": ["city": "Lyon"]], "key": "objectId"]]]), ["OL"])
        let counted = try h.call("GET", "/parse/classes/Player" + query(["where": jsonText(["team": ["$inQuery": inParis]]), "count": "1", "limit": "0"]))
        XCTAssertEqual(counted["count"] as? Int, 1)

        // Nested: players of teams whose city is in the Paris list of cities.
        _ = try create(h, "City", ["name": "Paris", "country": "FR"])
        let nested: [String: Any] = ["team": ["$inQuery": ["className": "Team", "where": [
            "city": ["$select": ["query": ["className": "City", "where": ["country": "FR"]], "key": "name"]]]]]]
        XCTAssertEqual(try names(h, "Player", nested), ["a"])
        await h.shutdown()
    }

    func testSubqueriesOnUsersAndSessionsSeeOnlyWhatTheViewerMayRead() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["city": "Paris"]), bob = try h.signUp("bob", extra: ["city": "Rome"])
        _ = try create(h, "Post", ["name": "by alice", "author": pointer("_User", alice.id)])
        _ = try create(h, "Post", ["name": "by bob", "author": pointer("_User", bob.id)])
        XCTAssertEqual(try names(h, "Post", ["author": ["$inQuery": ["className": "_User", "where": ["username": "alice"]]]]), ["by alice"])
        XCTAssertEqual(try names(h, "Post", ["author": ["$inQuery": ["className": "_User", "where": ["city": "Rome"]]]]), ["by bob"])
        // A user whose ACL hides it from others is not in anyone else's subquery.
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(bob.id)", body: ["ACL": [bob.id: ["read": true, "write": true]]], token: bob.token).status, 200)
        let byRome: [String: Any] = ["author": ["$inQuery": ["className": "_User", "where": ["city": "Rome"]]]]
        XCTAssertEqual(try names(h, "Post", byRome, token: alice.token), [])
        XCTAssertEqual(try names(h, "Post", byRome), [])
        XCTAssertEqual(try names(h, "Post", byRome, token: bob.token), ["by bob"])
        XCTAssertEqual(try names(h, "Post", byRome, master: true), ["by bob"])
        // Sessions: only the viewer's own.
        let bySession: [String: Any] = ["author": ["$select": ["query": ["className": "_Session", "where": [:]], "key": "user"]]]
        XCTAssertEqual(try names(h, "Post", bySession, token: alice.token), ["by alice"])
        XCTAssertEqual(try names(h, "Post", bySession, token: bob.token), ["by bob"])
        XCTAssertEqual(try names(h, "Post", bySession), [])
        // Secrets cannot be selected out of users: hidden fields 102, email 119 without the master key.
        let password = try h.call("GET", "/parse/classes/Post" + query(["where": jsonText(
            ["name": ["$select": ["query": ["className": "_User", "where": [:]], "key": "password"]]])]))
        XCTAssertEqual(password.code, 102, "\(password.json ?? "")")
        let email = try h.call("GET", "/parse/classes/Post" + query(["where": jsonText(
            ["name": ["$select": ["query": ["className": "_User", "where": ["email": ["$exists": true]]], "key": "username"]]])]), token: alice.token)
        XCTAssertEqual(email.code, 119, "\(email.json ?? "")")
        await h.shutdown()
    }

    func testSubqueryClassPermissionsRefuseOrNarrowAsAFindOnThatClass() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Vault", body: [
            "fields": ["name": ["type": "String"]],
            "classLevelPermissions": ["find": [:], "get": [:], "count": [:], "create": [:], "update": [:], "delete": [:], "addField": [:]],
        ], master: true).status, 200)
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Doc", body: [
            "fields": ["name": ["type": "String"], "owner": ["type": "Pointer", "targetClass": "_User"]],
            "classLevelPermissions": ["find": [:], "get": [:], "count": [:], "create": ["*": true], "update": [:], "delete": [:], "addField": [:],
                                      "readUserFields": ["owner"]],
        ], master: true).status, 200)
        let vault = try create(h, "Vault", ["name": "gold"], master: true)
        let aliceDoc = try create(h, "Doc", ["name": "alice's", "owner": pointer("_User", alice.id)])
        let bobDoc = try create(h, "Doc", ["name": "bob's", "owner": pointer("_User", bob.id)])
        _ = try create(h, "Note", ["name": "on gold", "vault": pointer("Vault", vault)])
        _ = try create(h, "Note", ["name": "on alice's", "doc": pointer("Doc", aliceDoc)])
        _ = try create(h, "Note", ["name": "on bob's", "doc": pointer("Doc", bobDoc)])

        let inVault: [String: Any] = ["vault": ["$inQuery": ["className": "Vault", "where": [:]]]]
        for token in [alice.token, nil, alice.token] {  // twice: the second with the schemas cached (the inline find declines)
            let refused = try h.call("GET", "/parse/classes/Note" + query(["where": jsonText(inVault)]), token: token)
            XCTAssertEqual(refused.code, 119, "\(refused.json ?? "")")
            XCTAssertEqual(refused["error"] as? String, "Permission denied for action find on class Vault.")
            let nested = try h.call("GET", "/parse/classes/Note" + query(["where": jsonText(["$or": [["name": "x"], inVault]])]), token: token)
            XCTAssertEqual(nested.code, 119, "inside $or too")
        }
        XCTAssertEqual(try names(h, "Note", inVault, master: true), ["on gold"])
        // A batch sub-request passes the same step.
        let batch = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "GET", "path": "/parse/classes/Note", "body": ["where": inVault]],
            ["method": "GET", "path": "/parse/classes/Note", "body": ["where": ["name": "on gold"]]],
        ]], token: alice.token)
        let answers = try XCTUnwrap(batch.json as? [[String: Any]], "\(batch.json ?? "")")
        XCTAssertEqual((answers[0]["error"] as? [String: Any])?["code"] as? Int, 119, "\(answers)")
        XCTAssertNotNil(answers[1]["success"])
        // Pointer permissions narrow the subquery to the viewer's own documents; none without a session.
        let inDocs: [String: Any] = ["doc": ["$inQuery": ["className": "Doc", "where": [:]]]]
        XCTAssertEqual(try names(h, "Note", inDocs, token: alice.token), ["on alice's"])
        XCTAssertEqual(try names(h, "Note", inDocs, token: bob.token), ["on bob's"])
        XCTAssertEqual(try names(h, "Note", inDocs), [])
        XCTAssertEqual(try names(h, "Note", ["doc": ["$notInQuery": ["className": "Doc", "where": [:]]]], token: alice.token), ["on bob's", "on gold"])
        await h.shutdown()
    }

    func testMalformedAndTooDeepSubqueriesAre102AndTheServerKeepsServing() async throws {
        let h = try await ParseHarness()
        _ = try create(h, "Team", ["name": "PSG"])
        let malformed: [[String: Any]] = [
            ["team": ["$inQuery": "Team"]],
            ["team": ["$inQuery": ["className": "Team"]]],
            ["team": ["$inQuery": ["where": [:]]]],
            ["team": ["$inQuery": ["className": "Team", "where": "x"]]],
            ["team": ["$inQuery": ["className": "no such!", "where": [:]]]],
            ["team": ["$notInQuery": ["className": 5, "where": [:]]]],
            ["team": ["$select": ["query": ["className": "Team"]]]],
            ["team": ["$select": ["query": ["className": "Team"], "key": "name", "extra": 1]]],
            ["team": ["$select": ["query": ["className": "Team"], "key": "bad key"]]],
            ["team": ["$dontSelect": ["query": "Team", "key": "name"]]],
            ["team": ["$inQuery": ["className": "Team", "where": ["name": ["$bogus": 1]]]]],
        ]
        for whereValue in malformed {
            let reply = try h.call("GET", "/parse/classes/Player" + query(["where": jsonText(whereValue)]))
            XCTAssertEqual(reply.status, 400, "\(whereValue): \(reply.json ?? "")")
            XCTAssertEqual(reply.code, 102, "\(whereValue): \(reply.json ?? "")")
        }
        // Subqueries nest at most four deep.
        func nested(_ depth: Int) -> [String: Any] {
            var value: [String: Any] = ["name": "PSG"]
            for _ in 0..<depth { value = ["team": ["$inQuery": ["className": "Team", "where": value]]] }
            return value
        }
        XCTAssertEqual(try h.call("GET", "/parse/classes/Team" + query(["where": jsonText(nested(4))])).status, 200)
        let deep = try h.call("GET", "/parse/classes/Team" + query(["where": jsonText(nested(5))]))
        XCTAssertEqual(deep.code, 102, "\(deep.json ?? "")")
        XCTAssertEqual(deep["error"] as? String, "$inQuery nested deeper than 4 subqueries")
        // A flood of wide subqueries stays within the condition bound.
        let wide: [String: Any] = ["$or": (0..<300).map { _ in ["team": ["$inQuery": ["className": "Team", "where": ["name": "PSG"]]]] }]
        let flood = try h.call("POST", "/parse/classes/Player", body: ["_method": "GET", "where": wide])
        XCTAssertEqual(flood.code, 102, "\(flood.json ?? "")")
        // A flood of concurrent subquery finds: every one answered, correctly.
        let answered = Mutex<[Int]>([])
        let path = "/parse/classes/Team" + query(["where": jsonText(nested(2))])
        DispatchQueue.concurrentPerform(iterations: 40) { _ in
            let reply = try? h.call("GET", path)
            answered.withLock { $0.append(reply?.status ?? 0) }
        }
        XCTAssertEqual(answered.withLock { $0 }, Array(repeating: 200, count: 40))
        XCTAssertEqual(try names(h, "Team", [:]), ["PSG"], "still serving")
        await h.shutdown()
    }
}
