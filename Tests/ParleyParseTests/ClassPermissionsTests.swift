import Foundation
import ParleyAccounts
import ParleyPostgres
import XCTest

/// Class-level permissions over HTTP and PostgreSQL, as Parse Server enforces them: each
/// operation allowed and refused for the master key, a user, a role member and no session, on
/// single requests, batch sub-requests and the inline finds; pointer permissions; protected
/// fields; and `allowClientClassCreation`.
final class ClassPermissionsTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    private func results(_ reply: ParseHarness.Reply) -> [[String: Any]]? { reply["results"] as? [[String: Any]] }

    func testEachOperationAllowedAndRefusedForMasterUserRoleMemberAndNoSession() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob")
        let role = try h.call("POST", "/parse/roles", body: ["name": "Mods", "ACL": ["*": ["read": true]],
                                                            "users": ["__op": "AddRelation", "objects": [pointer("_User", alice.id)]]], master: true)
        XCTAssertEqual(role.status, 201, "\(role.json ?? "")")
        let created = try h.call("POST", "/parse/schemas/Post", body: [
            "fields": ["text": ["type": "String"]],
            "classLevelPermissions": [
                "find": ["role:Mods": true], "count": [alice.id: true], "get": ["requiresAuthentication": true],
                "create": ["*": true], "update": ["role:Mods": true], "delete": [bob.id: true], "addField": [:],
            ],
        ], master: true)
        XCTAssertEqual(created.status, 200, "\(created.json ?? "")")
        let post = try XCTUnwrap(try h.call("POST", "/parse/classes/Post", body: ["text": "a"])["objectId"] as? String, "create is public")
        let find = "/parse/classes/Post"

        // find: the role member and the master key.
        XCTAssertEqual(results(try h.call("GET", find, token: alice.token))?.count, 1)
        XCTAssertEqual(results(try h.call("GET", find, token: alice.token))?.count, 1, "again, inline with the schema cached")
        XCTAssertEqual(results(try h.call("GET", find, master: true))?.count, 1)
        for token in [bob.token, nil] {
            for _ in 0..<2 {
                let refused = try h.call("GET", find, token: token)
                XCTAssertEqual(refused.status, 400)
                XCTAssertEqual(refused.code, 119)
                XCTAssertEqual(refused["error"] as? String, "Permission denied for action find on class Post.")
            }
        }
        // count: find and count both; alice has both.
        XCTAssertEqual(try h.call("GET", find + query(["count": "1", "limit": "0"]), token: alice.token)["count"] as? Int, 1)
        XCTAssertEqual(try h.call("GET", find + query(["count": "1", "limit": "0"]), master: true)["count"] as? Int, 1)
        let counting = try h.call("GET", find + query(["count": "1", "limit": "0"]), token: bob.token)
        XCTAssertEqual(counting["error"] as? String, "Permission denied for action count on class Post.", "limit=0 runs only the count")
        // get: any session.
        XCTAssertEqual(try h.call("GET", "\(find)/\(post)", token: bob.token).status, 200)
        let anonymous = try h.call("GET", "\(find)/\(post)")
        XCTAssertEqual(anonymous.status, 404)
        XCTAssertEqual(anonymous["error"] as? String, "Permission denied, user needs to be authenticated.")
        // update: the role member.
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["text": "b"], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["text": "c"], token: bob.token).code, 119)
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["text": "c"]).code, 119)
        // addField: nobody but the master key adds a field, on create or update.
        let adding = try h.call("POST", find, body: ["text": "x", "extra": 1], token: alice.token)
        XCTAssertEqual(adding.code, 119)
        XCTAssertEqual(adding["error"] as? String, "Permission denied for action addField on class Post.")
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["extra": 1], token: alice.token).code, 119)
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["extra": 1], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "\(find)/\(post)", body: ["extra": 2], token: alice.token).status, 200, "the field exists now")
        // Batch sub-requests pass the same step.
        let batch = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "GET", "path": find], ["method": "DELETE", "path": "\(find)/\(post)"],
        ]], token: alice.token)
        let answers = try XCTUnwrap(batch.json as? [[String: Any]], "\(batch.json ?? "")")
        XCTAssertNotNil(answers[0]["success"])
        XCTAssertEqual((answers[1]["error"] as? [String: Any])?["code"] as? Int, 119, "delete is bob's only")
        // delete: the user named.
        XCTAssertEqual(try h.call("DELETE", "\(find)/\(post)", token: alice.token).code, 119)
        XCTAssertEqual(try h.call("DELETE", "\(find)/\(post)", token: bob.token).status, 200)
        await h.shutdown()
    }

    func testPointerPermissionsNarrowReadsAndWritesToTheUsersNamed() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob"), carol = try h.signUp("carol")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Doc", body: [
            "fields": ["owner": ["type": "Pointer", "targetClass": "_User"], "editors": ["type": "Array"], "title": ["type": "String"]],
            "classLevelPermissions": [
                "create": ["*": true], "find": [:], "get": [:], "count": [:], "update": [:], "delete": ["pointerFields": ["owner"]],
                "addField": [:], "readUserFields": ["owner", "editors"], "writeUserFields": ["owner"],
            ],
        ], master: true).status, 200)
        let first = try XCTUnwrap(try h.call("POST", "/parse/classes/Doc", body: ["title": "one", "owner": pointer("_User", alice.id),
                                                                                   "editors": [pointer("_User", bob.id)]])["objectId"] as? String)
        let second = try XCTUnwrap(try h.call("POST", "/parse/classes/Doc", body: ["title": "two", "owner": pointer("_User", bob.id)])["objectId"] as? String)
        func titles(_ token: String?) throws -> [String] {
            (results(try h.call("GET", "/parse/classes/Doc" + query(["order": "title"]), token: token)) ?? []).compactMap { $0["title"] as? String }
        }
        for _ in 0..<2 {  // the full path, then the inline answer once the schema is cached
            XCTAssertEqual(try titles(alice.token), ["one"])
            XCTAssertEqual(try titles(bob.token), ["one", "two"], "owner of one, editor of the other")
            XCTAssertEqual(try titles(carol.token), [])
            XCTAssertEqual(try titles(nil), [], "no session: nothing, as Parse Server")
        }
        XCTAssertEqual(try h.call("GET", "/parse/classes/Doc" + query(["count": "1", "limit": "0"]), token: bob.token)["count"] as? Int, 2)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Doc/\(first)", token: bob.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Doc/\(first)", token: carol.token).code, 101)
        // Writes: only the owner (writeUserFields).
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Doc/\(first)", body: ["title": "uno"], token: bob.token).code, 101)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Doc/\(first)", body: ["title": "uno"], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Doc/\(first)", body: ["title": "uno"]).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Doc/\(second)", token: alice.token).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Doc/\(second)", token: bob.token).status, 200)
        // The inline find and the full one (a body-form find) answer the same bytes.
        let inline = try h.call("GET", "/parse/classes/Doc", token: bob.token)
        let full = try h.call("POST", "/parse/classes/Doc", body: ["_method": "GET"], token: bob.token)
        XCTAssertEqual(String(decoding: inline.body, as: UTF8.self), String(decoding: full.body, as: UTF8.self))
        await h.shutdown()
    }

    func testProtectedFieldsAreHiddenByEntryExceptFromTheMasterKeyAndTheUserItself() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["city": "Paris"]), bob = try h.signUp("bob", extra: ["city": "Rome"])
        XCTAssertEqual(try h.call("POST", "/parse/roles", body: ["name": "Staff", "ACL": ["*": ["read": true]],
                                                                "users": ["__op": "AddRelation", "objects": [pointer("_User", alice.id)]]], master: true).status, 201)
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Profile", body: [
            "fields": ["phone": ["type": "String"], "city": ["type": "String"], "name": ["type": "String"]],
            "classLevelPermissions": ["find": ["*": true], "get": ["*": true], "create": ["*": true], "update": ["*": true], "delete": ["*": true],
                                      "count": ["*": true], "addField": ["*": true],
                                      "protectedFields": ["*": ["phone", "city"], "authenticated": ["phone"], "role:Staff": []]],
        ], master: true).status, 200)
        let profile = try XCTUnwrap(try h.call("POST", "/parse/classes/Profile", body: ["name": "p", "phone": "555", "city": "Oslo"], master: true)["objectId"] as? String)
        func seen(_ token: String?, master: Bool = false) throws -> [Set<String>] {
            let one = try h.call("GET", "/parse/classes/Profile/\(profile)", token: token, master: master).object
            let found = results(try h.call("GET", "/parse/classes/Profile", token: token, master: master))?.first ?? [:]
            let batched = ((try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/parse/classes/Profile/\(profile)"]]],
                                       token: token, master: master).json as? [[String: Any]])?.first?["success"] as? [String: Any]) ?? [:]
            return [one, found, batched].map { Set($0.keys).intersection(["name", "phone", "city"]) }
        }
        for _ in 0..<2 {
            XCTAssertEqual(try seen(nil), Array(repeating: ["name"], count: 3), "public: phone and city hidden")
            XCTAssertEqual(try seen(bob.token), Array(repeating: ["name", "city"], count: 3), "authenticated: the intersection, phone")
            XCTAssertEqual(try seen(alice.token), Array(repeating: ["name", "phone", "city"], count: 3), "a role with nothing hidden")
            XCTAssertEqual(try seen(nil, master: true), Array(repeating: ["name", "phone", "city"], count: 3))
        }

        // On _User: other users' cities are hidden, a user's own is not.
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/_User", body: ["classLevelPermissions": [
            "find": ["*": true], "get": ["*": true], "create": ["*": true], "update": ["*": true], "delete": ["*": true], "count": ["*": true],
            "addField": ["*": true], "protectedFields": ["*": ["city"]],
        ]], master: true).status, 200)
        let users = results(try h.call("GET", "/parse/users" + query(["order": "username"]), token: alice.token)) ?? []
        XCTAssertEqual(users.map { $0["city"] as? String }, ["Paris", nil], "\(users)")
        XCTAssertNil(try h.call("GET", "/parse/users/\(alice.id)", token: bob.token)["city"])
        XCTAssertEqual(try h.call("GET", "/parse/users/\(bob.id)", token: bob.token)["city"] as? String, "Rome")
        XCTAssertEqual(try h.call("GET", "/parse/users/\(bob.id)", master: true)["city"] as? String, "Rome")
        await h.shutdown()
    }

    func testIncludedTargetsAreReadUnderTheirClassPermissions() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Card", body: [
            "fields": ["owner": ["type": "Pointer", "targetClass": "_User"], "secret": ["type": "String"], "name": ["type": "String"]],
            "classLevelPermissions": ["find": [:], "get": [:], "count": [:], "create": [:], "update": [:], "delete": [:], "addField": [:],
                                      "readUserFields": ["owner"], "protectedFields": ["*": ["secret"]]],
        ], master: true).status, 200)
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Locked", body: ["classLevelPermissions": ["create": [:]]], master: true).status, 200)
        let mine = try XCTUnwrap(try h.call("POST", "/parse/classes/Card", body: ["owner": pointer("_User", alice.id), "secret": "s", "name": "a"], master: true)["objectId"] as? String)
        let theirs = try XCTUnwrap(try h.call("POST", "/parse/classes/Card", body: ["owner": pointer("_User", bob.id), "secret": "s", "name": "b"], master: true)["objectId"] as? String)
        let locked = try XCTUnwrap(try h.call("POST", "/parse/classes/Locked", body: [:], master: true)["objectId"] as? String)
        for (card, hand) in [(mine, "mine"), (theirs, "theirs")] {
            XCTAssertEqual(try h.call("POST", "/parse/classes/Hand", body: ["label": hand, "card": pointer("Card", card), "box": pointer("Locked", locked)]).status, 201)
        }
        let hands = results(try h.call("GET", "/parse/classes/Hand" + query(["include": "card", "order": "label"]), token: alice.token)) ?? []
        let cards = hands.map { $0["card"] as? [String: Any] ?? [:] }
        XCTAssertEqual(cards.map { $0["__type"] as? String }, ["Object", nil], "bob's card is not alice's to read: left out, as any unreadable target")
        XCTAssertEqual(cards.first?["name"] as? String, "a")
        XCTAssertNil(cards.first?["secret"], "protected in the included object too")
        let refused = try h.call("GET", "/parse/classes/Hand" + query(["include": "box"]), token: alice.token)
        XCTAssertEqual(refused.code, 119, "\(refused.json ?? "")")
        XCTAssertEqual(refused["error"] as? String, "Permission denied for action get on class Locked.")
        XCTAssertEqual(results(try h.call("GET", "/parse/classes/Hand" + query(["include": "box,card"]), master: true))?.count, 2)
        await h.shutdown()
    }

    func testClientsCreateNoClassesUnlessAllowed() async throws {
        let h = try await ParseHarness(allowClientClassCreation: false)
        let user = try h.signUp("alice")
        for token in [user.token, nil] {
            let create = try h.call("POST", "/parse/classes/Invented", body: ["x": 1], token: token)
            XCTAssertEqual(create.code, 119)
            XCTAssertEqual(create["error"] as? String, "This user is not allowed to access non-existent class: Invented")
            XCTAssertEqual(try h.call("GET", "/parse/classes/Invented", token: token).code, 119)
        }
        let batch = try h.call("POST", "/parse/batch", body: ["requests": [["method": "POST", "path": "/parse/classes/Invented", "body": ["x": 1]]]], token: user.token)
        XCTAssertEqual(((batch.json as? [[String: Any]])?.first?["error"] as? [String: Any])?["code"] as? Int, 119)
        XCTAssertEqual(try h.call("GET", "/parse/schemas/Invented", master: true).code, 103, "nothing was created")
        // The master key creates it by writing; then clients use it under its permissions.
        XCTAssertEqual(try h.call("POST", "/parse/classes/Invented", body: ["x": 1], master: true).status, 201)
        XCTAssertEqual(try h.call("POST", "/parse/classes/Invented", body: ["x": 2], token: user.token).status, 201)
        XCTAssertEqual(results(try h.call("GET", "/parse/classes/Invented", token: user.token))?.count, 2)
        XCTAssertEqual(try h.call("GET", "/parse/users/me", token: user.token).status, 200, "system classes always exist")
        await h.shutdown()
    }
}
