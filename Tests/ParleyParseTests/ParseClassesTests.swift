import Foundation
import ParleyTestSupport
import Synchronization
import XCTest

final class ParseClassesTests: XCTestCase {
    /// Equality queries of one shape arriving together (16 clients at once, two event loops
    /// sharing the database connections) each get exactly their own rows, in their own order,
    /// under their own ACL.
    func testConcurrentEqualityQueriesEachGetTheirOwnRows() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        for n in 0..<24 {
            let acl: [String: Any] = n % 4 == 3 ? [alice.id: ["read": true, "write": true]] : ["*": ["read": true]]
            for copy in 0..<(n % 3) {
                _ = try h.call("POST", "/parse/classes/Card", body: ["name": "card\(n)", "copy": copy, "ACL": acl])
            }
        }
        let failures = Self.failures(ofConcurrent: 96) { index in
            let (n, asAlice) = (index % 24, index % 2 == 0)
            let reply = try h.call("GET", "/parse/classes/Card" + query(["where": jsonText(["name": "card\(n)"]), "order": "-copy"]),
                                   token: asAlice ? alice.token : nil)
            let copies = (reply["results"] as? [[String: Any]])?.compactMap { $0["name"] as? String == "card\(n)" ? $0["copy"] as? Int : -1 }
            let visible = n % 4 == 3 && !asAlice ? 0 : n % 3
            guard copies != Array((0..<visible).reversed()) else { return nil }
            return "card\(n) as \(asAlice ? "alice" : "anyone"): \(String(describing: copies)) \(reply.status)"
        }
        XCTAssertEqual(failures, [])
        await h.shutdown()
    }

    /// Runs `check` for the indices 0..<count on 16 threads at once; the failures it described
    /// (a returned message or a thrown error), in no particular order.
    private static func failures(ofConcurrent count: Int, _ check: @escaping @Sendable (Int) throws -> String?) -> [String] {
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 16) { worker in
            for index in stride(from: worker, to: count, by: 16) {
                do {
                    if let failure = try check(index) { failures.withLock { $0.append(failure) } }
                } catch {
                    failures.withLock { $0.append("request \(index): \(error)") }
                }
            }
        }
        return failures.withLock { $0 }
    }

    /// Gets by id are reads the client batches per loop turn: concurrent ones, found, hidden by
    /// their ACL or unknown, each get their own answer.
    func testConcurrentGetsByIdEachGetTheirOwnObject() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        var ids: [String] = []
        for n in 0..<12 {
            let acl: [String: Any] = n % 3 == 2 ? [alice.id: ["read": true, "write": true]] : ["*": ["read": true]]
            let created = try h.call("POST", "/parse/classes/Card", body: ["n": n, "ACL": acl])
            ids.append(try XCTUnwrap(created["objectId"] as? String))
        }
        let objectIds = ids
        let failures = Self.failures(ofConcurrent: 96) { index in
            let (n, asAlice) = (index % 13, index % 2 == 0)
            let id = n < 12 ? objectIds[n] : "unknown\(index)"
            let reply = try h.call("GET", "/parse/classes/Card/\(id)", token: asAlice ? alice.token : nil)
            let visible = n < 12 && (n % 3 != 2 || asAlice)
            let ok = visible ? reply.status == 200 && reply["n"] as? Int == n && reply["objectId"] as? String == id
                : reply.status == 404 && reply["code"] as? Int == 101
            return ok ? nil : "object \(n) as \(asAlice ? "alice" : "anyone"): \(reply.status) \(reply["n"] ?? "-")"
        }
        XCTAssertEqual(failures, [])
        await h.shutdown()
    }

    func testObjectsCRUDTypesOpsAndACL() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let bob = try h.signUp("bob")
        let created = try h.call("POST", "/parse/classes/GameScore", body: ["score": 1, "player": "a", "tags": ["x"]])
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(created["objectId"] as? String)
        XCTAssertEqual(created.header("Location"), "http://127.0.0.1/parse/classes/GameScore/\(id)")

        let got = try h.call("GET", "/parse/classes/GameScore/\(id)")
        XCTAssertEqual(got["score"] as? Int, 1)
        XCTAssertEqual(got["createdAt"] as? String, created["createdAt"] as? String)
        XCTAssertEqual(try h.call("GET", "/parse/classes/GameScore/nope").status, 404)

        let mismatch = try h.call("PUT", "/parse/classes/GameScore/\(id)", body: ["score": "high"])
        XCTAssertEqual(mismatch.status, 400)
        XCTAssertEqual(mismatch.code, 111)
        XCTAssertEqual(try h.call("POST", "/parse/classes/Bad-Name", body: [:]).code, 103)
        XCTAssertEqual(try h.call("POST", "/parse/classes/GameScore", body: ["bad field": 1]).code, 105)
        XCTAssertEqual(try h.call("POST", "/parse/classes/GameScore", body: ["text": "nul\u{0}"]).code, 107)
        XCTAssertEqual(try h.call("POST", "/parse/classes/GameScore", body: ["ACL": ["*": ["read": 1]]]).code, 123)
        XCTAssertEqual(try h.call("POST", "/parse/classes/GameScore", body: ["owner": ["__type": "Pointer", "className": "_User"]]).code, 106)
        XCTAssertEqual(try h.call("POST", "/parse/classes/GameScore", body: ["shape": ["__type": "Polygon", "coordinates": [[0, 0]]]]).code, 111)
        let manyFields = Dictionary(uniqueKeysWithValues: (0..<257).map { ("f\($0)", $0) })
        XCTAssertEqual(try h.call("POST", "/parse/classes/Wide", body: manyFields).code, 116)

        let ops = try h.call("PUT", "/parse/classes/GameScore/\(id)", body: [
            "score": ["__op": "Increment", "amount": 10], "tags": ["__op": "Add", "objects": ["y"]], "player": ["__op": "Delete"],
        ])
        XCTAssertEqual(ops.status, 200)
        XCTAssertEqual(ops["score"] as? Int, 11)
        XCTAssertEqual(ops["tags"] as? [String], ["x", "y"])
        let after = try h.call("GET", "/parse/classes/GameScore/\(id)" + query(["keys": "score"]))
        XCTAssertEqual(after["score"] as? Int, 11)
        XCTAssertNil(after["tags"])

        // ACL: Alice's private object.
        let priv = try h.call("POST", "/parse/classes/Diary", body: ["text": "secret", "ACL": [alice.id: ["read": true, "write": true]]], token: alice.token)
        let privId = try XCTUnwrap(priv["objectId"] as? String)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Diary/\(privId)", token: bob.token).status, 404)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Diary/\(privId)").status, 404)
        XCTAssertEqual(try h.call("PUT", "/parse/classes/Diary/\(privId)", body: ["text": "x"], token: bob.token).code, 101)
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/Diary/\(privId)", token: bob.token).code, 101)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Diary/\(privId)", token: alice.token)["text"] as? String, "secret")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Diary/\(privId)", master: true)["text"] as? String, "secret")
        let list = try h.call("GET", "/parse/classes/Diary", token: bob.token)
        XCTAssertEqual((list["results"] as? [Any])?.count, 0)
        XCTAssertEqual((try h.call("GET", "/parse/classes/Diary", token: alice.token)["results"] as? [Any])?.count, 1)

        // Query with where/order/limit/count.
        for n in 0..<5 { _ = try h.call("POST", "/parse/classes/Item", body: ["n": n, "even": n % 2 == 0]) }
        let q = try h.call("GET", "/parse/classes/Item" + query(["where": jsonText(["even": true]), "order": "-n", "limit": "2", "count": "1"]))
        XCTAssertEqual((q["results"] as? [[String: Any]])?.compactMap { $0["n"] as? Int }, [4, 2])
        XCTAssertEqual(q["count"] as? Int, 3)

        XCTAssertEqual(try h.call("DELETE", "/parse/classes/GameScore/\(id)").status, 200)
        XCTAssertEqual(try h.call("DELETE", "/parse/classes/GameScore/\(id)").status, 404)

        // System classes via /classes.
        let viaClasses = try h.call("GET", "/parse/classes/_User/\(alice.id)", token: bob.token)
        XCTAssertEqual(viaClasses["username"] as? String, "alice")
        let signupViaClasses = try h.call("POST", "/parse/classes/_User", body: ["username": "carol", "password": "pw"])
        XCTAssertEqual(signupViaClasses.status, 201)
        XCTAssertNotNil(signupViaClasses["sessionToken"])
        XCTAssertEqual(try h.call("GET", "/parse/classes/_Installation").code, 119)
        XCTAssertEqual(try h.call("POST", "/parse/classes/_Audience", body: [:]).code, 103, "a system class Parley does not implement")
        await h.shutdown()
    }

    func testJavaScriptSDKFormAndGetWithBody() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        // Everything as POST text/plain with the envelope in the body.
        func js(_ path: String, _ body: [String: Any]) throws -> ParseHarness.Reply {
            var payload = body
            payload["_ApplicationId"] = h.appID
            payload["_JavaScriptKey"] = "ignored"
            payload["_ClientVersion"] = "js4.0.0"
            return try h.call("POST", path, appID: .some(nil), headers: [("Content-Type", "text/plain")], rawBody: jsonText(payload))
        }
        let created = try js("/parse/classes/Note", ["text": "hi", "_SessionToken": alice.token])
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(created["objectId"] as? String)
        let fetched = try js("/parse/classes/Note/\(id)", ["_method": "GET"])
        XCTAssertEqual(fetched["text"] as? String, "hi")
        XCTAssertNil(fetched["_ApplicationId"])
        let queried = try js("/parse/classes/Note", ["_method": "GET", "where": ["text": "hi"], "limit": 5, "count": 1])
        XCTAssertEqual(queried["count"] as? Int, 1)
        let me = try js("/parse/users/me", ["_method": "GET", "_SessionToken": alice.token])
        XCTAssertEqual(me["username"] as? String, "alice")
        let updated = try js("/parse/classes/Note/\(id)", ["_method": "PUT", "text": "edited"])
        XCTAssertEqual(updated.status, 200)
        let deleted = try js("/parse/classes/Note/\(id)", ["_method": "DELETE", "_MasterKey": h.masterKey])
        XCTAssertEqual(deleted.status, 200)
        let noApp = try h.call("POST", "/parse/classes/Note", appID: .some(nil), rawBody: jsonText(["_method": "GET"]))
        XCTAssertEqual(noApp.status, 403)
        await h.shutdown()
    }

    func testBatchInOrderAndTransactional() async throws {
        let h = try await ParseHarness()
        let batch = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": 1]],
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": "wrong type"]],
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": 3]],
            ["method": "GET", "path": "/parse/classes/Thing/missing"],
            ["method": "GET", "path": "/parse/nowhere"],
        ]])
        XCTAssertEqual(batch.status, 200)
        let results = try XCTUnwrap(batch.json as? [[String: Any]])
        XCTAssertEqual(results.count, 5)
        let unroutable = try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/elsewhere/classes/Thing"]]])
        XCTAssertEqual(unroutable.code, 107, "a path outside the mount refuses the whole batch, as Parse Server")
        XCTAssertNotNil((results[0]["success"] as? [String: Any])?["objectId"])
        XCTAssertEqual((results[1]["error"] as? [String: Any])?["code"] as? Int, 111)
        XCTAssertNotNil(results[2]["success"])
        XCTAssertEqual((results[3]["error"] as? [String: Any])?["code"] as? Int, 101)
        XCTAssertEqual((results[4]["error"] as? [String: Any])?["code"] as? Int, 107)
        let firstId = try XCTUnwrap((results[0]["success"] as? [String: Any])?["objectId"] as? String)
        let update = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "PUT", "path": "/parse/classes/Thing/\(firstId)", "body": ["n": ["__op": "Increment"]]],
            ["method": "DELETE", "path": "/parse/classes/Thing/\(firstId)"],
        ]])
        XCTAssertEqual((update.json as? [[String: Any]])?.compactMap { $0["success"] }.count, 2)

        // Transactional: the failure rolls back the first create.
        let before = try h.call("GET", "/parse/classes/Thing" + query(["count": "1", "limit": "0"]))["count"] as? Int
        let tx = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": 10]],
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": "bad"]],
        ]])
        XCTAssertEqual(tx.status, 400)
        XCTAssertEqual(tx.code, 111)
        let afterCount = try h.call("GET", "/parse/classes/Thing" + query(["count": "1", "limit": "0"]))["count"] as? Int
        XCTAssertEqual(before, afterCount)
        let ok = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": 10]],
            ["method": "POST", "path": "/parse/classes/Thing", "body": ["n": 11]],
        ]])
        XCTAssertEqual((ok.json as? [[String: Any]])?.count, 2)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Thing" + query(["count": "1", "limit": "0"]))["count"] as? Int, (afterCount ?? 0) + 2)

        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": "nope"]).code, 107)
        let tooMany = (0..<51).map { _ in ["method": "GET", "path": "/parse/classes/Thing"] }
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": tooMany]).code, 107)
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": [["method": "POST", "path": "/parse/batch", "body": ["requests": []]]]]).code, 107)
        await h.shutdown()
    }

    func testInstallationsOverHTTP() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let created = try h.call("POST", "/parse/installations", body: ["installationId": "inst-a", "deviceType": "ios", "deviceToken": "apns"], token: alice.token)
        XCTAssertEqual(created.status, 201)
        let id = try XCTUnwrap(created["objectId"] as? String)
        XCTAssertEqual(try h.call("POST", "/parse/installations", body: ["installationId": "inst-a", "deviceType": "ios", "voipDeviceToken": "evil"]).code, 101,
                       "an anonymous upsert may not touch alice's installation")
        let again = try h.call("POST", "/parse/installations", body: ["installationId": "inst-a", "deviceType": "ios", "voipDeviceToken": "voip"], token: alice.token)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again["objectId"] as? String, id)
        XCTAssertNil(try h.call("GET", "/parse/installations/\(id)")["deviceToken"], "tokens only for the installation's user")
        let got = try h.call("GET", "/parse/installations/\(id)", token: alice.token)
        XCTAssertEqual(got["voipDeviceToken"] as? String, "voip")
        XCTAssertEqual(got["deviceToken"] as? String, "apns")
        XCTAssertEqual((got["user"] as? [String: Any])?["objectId"] as? String, alice.id)
        let viaHeader = try h.call("POST", "/parse/installations", body: ["deviceType": "android"], headers: [("X-Parse-Installation-Id", "inst-b")])
        XCTAssertEqual(viaHeader.status, 201)
        XCTAssertEqual(try h.call("POST", "/parse/installations", body: ["installationId": "inst-c"]).code, 135)
        XCTAssertEqual(try h.call("PUT", "/parse/installations/\(id)", body: ["deviceToken": "apns2"]).code, 101)
        XCTAssertEqual(try h.call("PUT", "/parse/installations/\(id)", body: ["deviceToken": "apns2"], token: alice.token).status, 200)
        XCTAssertEqual(try h.call("GET", "/parse/installations").code, 119)
        let all = try h.call("GET", "/parse/installations" + query(["where": jsonText(["deviceType": "ios"])]), master: true)
        XCTAssertEqual((all["results"] as? [[String: Any]])?.first?["deviceToken"] as? String, "apns2")
        XCTAssertEqual(try h.call("DELETE", "/parse/installations/\(id)", token: alice.token).code, 119)
        XCTAssertEqual(try h.call("DELETE", "/parse/installations/\(id)", master: true).status, 200)
        await h.shutdown()
    }

    func testGeoQueriesThroughTheAPI() async throws {
        let h = try await ParseHarness()
        let near = try h.signUp("near", extra: ["location": ["__type": "GeoPoint", "latitude": 48.8584, "longitude": 2.2945]])
        _ = try h.signUp("far", extra: ["location": ["__type": "GeoPoint", "latitude": 40.7, "longitude": -74.0]])
        let center: [String: Any] = ["__type": "GeoPoint", "latitude": 48.8606, "longitude": 2.3376]
        let within = try h.call("GET", "/parse/users" + query(["where": jsonText(["location": ["$nearSphere": center, "$maxDistanceInKilometers": 10]])]), token: near.token)
        XCTAssertEqual((within["results"] as? [[String: Any]])?.compactMap { $0["username"] as? String }, ["near"])
        let sorted = try h.call("GET", "/parse/users" + query(["where": jsonText(["location": ["$nearSphere": center]])]), token: near.token)
        XCTAssertEqual((sorted["results"] as? [[String: Any]])?.compactMap { $0["username"] as? String }, ["near", "far"])
        await h.shutdown()
    }
}
