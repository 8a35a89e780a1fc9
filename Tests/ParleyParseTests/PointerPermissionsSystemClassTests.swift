import Foundation
import XCTest

/// `protectedFields` `userField:` entries (an object's pointer to the viewer reduces what is
/// hidden from it, per object, as Parse Server's `filterSensitiveData`), and pointer permissions
/// (`readUserFields`/`writeUserFields`) on the system classes' own endpoints: `/users/:id`,
/// `/installations/:id`, `/roles/:id`.
final class PointerPermissionsSystemClassTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    func testUserFieldEntriesRevealProtectedFieldsToTheUsersAnObjectPointsTo() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob"), carol = try h.signUp("carol")
        XCTAssertEqual(try h.call("POST", "/parse/schemas/Profile", body: [
            "fields": ["name": ["type": "String"], "secret": ["type": "String"], "phone": ["type": "String"],
                       "owner": ["type": "Pointer", "targetClass": "_User"], "editors": ["type": "Array"]],
            "classLevelPermissions": ["find": ["*": true], "get": ["*": true], "count": ["*": true], "create": ["*": true], "update": ["*": true],
                                      "delete": ["*": true], "addField": ["*": true],
                                      "protectedFields": ["*": ["secret", "phone"], "userField:owner": [], "userField:editors": ["phone"]]],
        ], master: true).status, 200)
        let first = try XCTUnwrap(try h.call("POST", "/parse/classes/Profile", body: [
            "name": "one", "secret": "s1", "phone": "p1", "owner": pointer("_User", alice.id), "editors": [pointer("_User", bob.id)]])["objectId"] as? String)
        _ = try h.call("POST", "/parse/classes/Profile", body: ["name": "two", "secret": "s2", "phone": "p2", "owner": pointer("_User", bob.id)])
        func seen(_ token: String?, _ parameters: [String: String] = [:], master: Bool = false) throws -> [String: Set<String>] {
            var parameters = parameters
            parameters["order"] = "name"
            let reply = try h.call("GET", "/parse/classes/Profile" + query(parameters), token: token, master: master)
            XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")")
            var seen: [String: Set<String>] = [:]
            for object in reply["results"] as? [[String: Any]] ?? [] {
                seen[object["name"] as? String ?? "?"] = Set(object.keys).intersection(["secret", "phone", "owner"])
            }
            return seen
        }
        XCTAssertEqual(try seen(nil), ["one": ["owner"], "two": ["owner"]])
        XCTAssertEqual(try seen(carol.token), ["one": ["owner"], "two": ["owner"]])
        XCTAssertEqual(try seen(alice.token), ["one": ["owner", "secret", "phone"], "two": ["owner"]], "the owner sees everything of its own")
        XCTAssertEqual(try seen(bob.token), ["one": ["owner", "secret"], "two": ["owner", "secret", "phone"]], "an editor: the intersection, phone hidden")
        XCTAssertEqual(try seen(nil, master: true), ["one": ["owner", "secret", "phone"], "two": ["owner", "secret", "phone"]])
        // With keys that leave the pointer out, it is still read to decide, and not returned.
        XCTAssertEqual(try seen(alice.token, ["keys": "name,secret"]), ["one": ["secret"], "two": []])
        // A get, and an include, apply the same rule.
        XCTAssertEqual(try h.call("GET", "/parse/classes/Profile/\(first)", token: alice.token)["secret"] as? String, "s1")
        XCTAssertNil(try h.call("GET", "/parse/classes/Profile/\(first)", token: carol.token)["secret"])
        XCTAssertEqual(try h.call("POST", "/parse/classes/Card", body: ["profile": pointer("Profile", first)]).status, 201)
        let included = try h.call("GET", "/parse/classes/Card" + query(["include": "profile"]), token: alice.token)
        let profile = (included["results"] as? [[String: Any]])?.first?["profile"] as? [String: Any]
        XCTAssertEqual(profile?["phone"] as? String, "p1")
        let forCarol = try h.call("GET", "/parse/classes/Card" + query(["include": "profile"]), token: carol.token)
        XCTAssertNil(((forCarol["results"] as? [[String: Any]])?.first?["profile"] as? [String: Any])?["phone"])
        // A protected field cannot be probed through a query (Parse Server's denyProtectedFields), nor through a subquery.
        let probes: [[String: Any]] = [
            ["secret": "s1"], ["$or": [["name": "x"], ["phone": ["$regex": "^p"]]]], ["secret.length": 2],
            ["profile": ["$inQuery": ["className": "Profile", "where": ["secret": "s1"]]]],
            ["name": ["$select": ["query": ["className": "Profile", "where": [:]], "key": "secret"]]],
        ]
        for (position, probe) in probes.enumerated() {
            let className = position < 3 ? "Profile" : "Card"
            for token in [carol.token, nil] {
                let refused = try h.call("GET", "/parse/classes/\(className)" + query(["where": jsonText(probe)]), token: token)
                XCTAssertEqual(refused.code, 119, "\(probe): \(refused.json ?? "")")
            }
            XCTAssertEqual(try h.call("GET", "/parse/classes/\(className)" + query(["where": jsonText(probe)]), master: true).status, 200)
        }
        XCTAssertEqual((try h.call("GET", "/parse/classes/Profile" + query(["where": jsonText(["name": "one"])]), token: carol.token)["results"] as? [Any])?.count, 1)
        // On _User, through /users/:id and /users.
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["city": "Paris", "buddy": pointer("_User", bob.id)], master: true).status, 200)
        let clp = try h.call("PUT", "/parse/schemas/_User", body: ["classLevelPermissions": [
            "find": ["*": true], "get": ["*": true], "create": ["*": true], "update": ["*": true], "delete": ["*": true], "count": ["*": true],
            "addField": ["*": true], "protectedFields": ["*": ["city"], "userField:buddy": []],
        ]], master: true)
        XCTAssertEqual(clp.status, 200, "\(clp.json ?? "")")
        XCTAssertEqual(try h.call("GET", "/parse/users/\(alice.id)", token: bob.token)["city"] as? String, "Paris", "her buddy")
        XCTAssertNil(try h.call("GET", "/parse/users/\(alice.id)", token: carol.token)["city"])
        let users = try h.call("GET", "/parse/users" + query(["where": jsonText(["username": "alice"])]), token: bob.token)
        XCTAssertEqual((users["results"] as? [[String: Any]])?.first?["city"] as? String, "Paris")
        await h.shutdown()
    }

    func testPointerPermissionsApplyToUserInstallationAndRoleEndpoints() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice"), bob = try h.signUp("bob"), carol = try h.signUp("carol")
        // _User: a user may update itself only while its `guardian` names it (Parse lets users
        // update themselves only, so the pointer permission narrows that).
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(bob.id)", body: ["guardian": pointer("_User", alice.id)], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(carol.id)", body: ["guardian": pointer("_User", carol.id)], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/_User", body: ["classLevelPermissions": [
            "find": ["*": true], "get": ["*": true], "create": ["*": true], "update": [:], "delete": [:], "count": ["*": true],
            "addField": ["*": true], "writeUserFields": ["guardian"],
        ]], master: true).status, 200)
        let byBob = try h.call("PUT", "/parse/users/\(bob.id)", body: ["nick": "x"], token: bob.token)
        XCTAssertEqual(byBob.code, 206, "\(byBob.json ?? "")")
        XCTAssertEqual(try h.call("DELETE", "/parse/users/\(bob.id)", token: bob.token).code, 206)
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(carol.id)", body: ["nick": "z"], token: carol.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/users/\(carol.id)", master: true)["nick"] as? String, "z")
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(bob.id)", body: ["nick": "m"], master: true).status, 200, "the master key")

        // _Installation: reads only by the installation's user.
        let installation = try XCTUnwrap(try h.call("POST", "/parse/installations", body: ["installationId": "i-1", "deviceType": "ios", "owner": pointer("_User", alice.id)],
                                                    token: alice.token)["objectId"] as? String)
        XCTAssertEqual(try h.call("GET", "/parse/installations/\(installation)", token: bob.token).status, 200, "before: anyone with the id")
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/_Installation", body: ["classLevelPermissions": [
            "find": [:], "get": [:], "create": ["*": true], "update": [:], "delete": [:], "count": [:], "addField": ["*": true],
            "readUserFields": ["owner"], "writeUserFields": ["owner"],
        ]], master: true).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/installations/\(installation)", token: bob.token).status, 404)
        XCTAssertEqual(try h.call("GET", "/parse/installations/\(installation)").status, 404)
        XCTAssertEqual(try h.call("GET", "/parse/installations/\(installation)", token: alice.token).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/installations/\(installation)", body: ["badge": 1], token: bob.token).status, 404)
        XCTAssertEqual(try h.call("PUT", "/parse/installations/\(installation)", body: ["badge": 1], token: alice.token).status, 200)

        // _Role: updates and deletes only by the role's `owner`.
        let role = try XCTUnwrap(try h.call("POST", "/parse/roles", body: ["name": "Crew", "owner": pointer("_User", alice.id),
                                                                          "ACL": ["*": ["read": true, "write": true]]], master: true)["objectId"] as? String)
        XCTAssertEqual(try h.call("PUT", "/parse/schemas/_Role", body: ["classLevelPermissions": [
            "find": ["*": true], "get": ["*": true], "create": [:], "update": [:], "delete": [:], "count": ["*": true], "addField": [:],
            "writeUserFields": ["owner"],
        ]], master: true).status, 200)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(role)", body: ["owner": pointer("_User", bob.id)], token: bob.token).status, 404)
        XCTAssertEqual(try h.call("DELETE", "/parse/roles/\(role)", token: carol.token).status, 404)
        XCTAssertEqual(try h.call("PUT", "/parse/roles/\(role)", body: ["users": ["__op": "AddRelation", "objects": [pointer("_User", bob.id)]]],
                                  token: alice.token).status, 200)
        XCTAssertEqual(try h.call("DELETE", "/parse/roles/\(role)", token: alice.token).status, 200)
        await h.shutdown()
    }
}
