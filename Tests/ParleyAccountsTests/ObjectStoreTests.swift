import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

final class ObjectStoreTests: XCTestCase {
    func testCreateGetUpdateDeleteWithTypesAndOperations() async throws {
        let h = try await AccountsHarness(prefix: "objects")
        let objects = h.accounts.objects, db = h.client
        let created = try await objects.create(className: "GameScore", body: [
            "score": 10, "name": "a", "tags": ["x"], "when": ["__type": "Date", "iso": "2026-01-01T00:00:00Z"],
            "owner": ["__type": "Pointer", "className": "_User", "objectId": "abcdefghij"],
        ], auth: .anonymous, on: db)
        let id = try XCTUnwrap(created["objectId"]?.string)
        XCTAssertNotNil(created["createdAt"]?.string)

        let fetched = try parsed(try await objects.get(className: "GameScore", objectId: id, auth: .anonymous, on: db))
        XCTAssertEqual(fetched["score"], 10)
        XCTAssertEqual(fetched["when"]?["iso"], "2026-01-01T00:00:00.000Z")
        XCTAssertEqual(fetched["createdAt"], created["createdAt"])
        XCTAssertEqual(fetched["updatedAt"], created["createdAt"])
        XCTAssertNil(fetched["ACL"])

        await XCTAssertParseError(111) { try await objects.update(className: "GameScore", objectId: id, body: ["score": "ten"], auth: .anonymous, on: db) }
        await XCTAssertParseError(111) { try await objects.create(className: "GameScore", body: ["name": 5], auth: .anonymous, on: db) }
        await XCTAssertParseError(111) { try await objects.update(className: "GameScore", objectId: id, body: ["name": ["__op": "Increment"]], auth: .anonymous, on: db) }
        await XCTAssertParseError(111) {
            try await objects.update(className: "GameScore", objectId: id, body: ["owner": ["__type": "Pointer", "className": "Other", "objectId": "abc"]], auth: .anonymous, on: db)
        }
        await XCTAssertParseError(103) { try await objects.create(className: "bad-name", body: [:], auth: .anonymous, on: db) }
        await XCTAssertParseError(103) { try await objects.create(className: "_Secret", body: [:], auth: .anonymous, on: db) }
        await XCTAssertParseError(101) { try await objects.get(className: "GameScore", objectId: "missing", auth: .anonymous, on: db) }

        let response = try await objects.update(className: "GameScore", objectId: id, body: [
            "score": ["__op": "Increment", "amount": 5],
            "tags": ["__op": "AddUnique", "objects": ["x", "y", "y"]],
            "list": ["__op": "Add", "objects": [1, 2, 1]],
            "name": ["__op": "Delete"],
        ], auth: .anonymous, on: db)
        XCTAssertEqual(response["score"], 15)
        XCTAssertEqual(response["tags"], ["x", "y"])
        XCTAssertEqual(response["list"], [1, 2, 1])
        _ = try await objects.update(className: "GameScore", objectId: id, body: ["list": ["__op": "Remove", "objects": [1]], "score": ["__op": "Increment", "amount": -0.5]], auth: .anonymous, on: db)
        let after = try parsed(try await objects.get(className: "GameScore", objectId: id, auth: .anonymous, on: db))
        XCTAssertEqual(after["list"], [2])
        XCTAssertEqual(after["score"]?.double, 14.5)
        XCTAssertNil(after["name"])
        XCTAssertNotEqual(after["updatedAt"], after["createdAt"])

        // keys= selects fields.
        let some = try parsed(try await objects.get(className: "GameScore", objectId: id, auth: .anonymous, keys: ["score"], on: db))
        XCTAssertEqual(Set(some.keys), ["objectId", "score", "createdAt", "updatedAt"])

        try await objects.delete(className: "GameScore", objectId: id, auth: .anonymous, on: db)
        await XCTAssertParseError(101) { try await objects.delete(className: "GameScore", objectId: id, auth: .anonymous, on: db) }
        await h.shutdown()
    }

    func testConcurrentIncrementsAreAtomic() async throws {
        let h = try await AccountsHarness(prefix: "atomic")
        let objects = h.accounts.objects, db = h.client
        let id = try await objects.create(className: "Counter", body: ["n": 0], auth: .anonymous, on: db)["objectId"]!.string!
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    _ = try await objects.update(className: "Counter", objectId: id, body: ["n": ["__op": "Increment"], "seen": ["__op": "AddUnique", "objects": ["a"]]], auth: .anonymous, on: db)
                }
            }
            try await group.waitForAll()
        }
        let counter = try parsed(try await objects.get(className: "Counter", objectId: id, auth: .anonymous, on: db))
        XCTAssertEqual(counter["n"], 50)
        XCTAssertEqual(counter["seen"], ["a"])
        await h.shutdown()
    }

    func testACLsRestrictReadsAndWritesButNotMaster() async throws {
        let h = try await AccountsHarness(prefix: "acl")
        let objects = h.accounts.objects, db = h.client
        let alice = try await h.signUp("alice")
        let bob = try await h.signUp("bob")
        let rw: JSONValue = ["read": true, "write": true], r: JSONValue = ["read": true]
        let acl: JSONValue = .object(JSONObject([(alice.objectId, rw), ("*", r)]))
        let id = try await objects.create(className: "Note", body: ["text": "hi", "ACL": acl], auth: h.auth(alice), on: db)["objectId"]!.string!
        let asBob = try parsed(try await objects.get(className: "Note", objectId: id, auth: h.auth(bob), on: db))
        XCTAssertEqual(asBob["text"], "hi")
        XCTAssertEqual(asBob["ACL"]?[alice.objectId], ["read": true, "write": true])
        await XCTAssertParseError(101) { try await objects.update(className: "Note", objectId: id, body: ["text": "pwned"], auth: h.auth(bob), on: db) }
        await XCTAssertParseError(101) { try await objects.delete(className: "Note", objectId: id, auth: .anonymous, on: db) }
        _ = try await objects.update(className: "Note", objectId: id, body: ["text": "edited"], auth: h.auth(alice), on: db)

        // Private to Alice: invisible to Bob and anonymous, visible to master.
        let privateACL: JSONValue = .object(JSONObject([(alice.objectId, rw)]))
        _ = try await objects.update(className: "Note", objectId: id, body: ["ACL": privateACL], auth: h.auth(alice), on: db)
        await XCTAssertParseError(101) { try await objects.get(className: "Note", objectId: id, auth: h.auth(bob), on: db) }
        await XCTAssertParseError(101) { try await objects.get(className: "Note", objectId: id, auth: .anonymous, on: db) }
        let asMaster = try parsed(try await objects.get(className: "Note", objectId: id, auth: .master, on: db))
        XCTAssertEqual(asMaster["text"], "edited")
        _ = try await objects.update(className: "Note", objectId: id, body: ["text": "by master"], auth: .master, on: db)
        try await objects.delete(className: "Note", objectId: id, auth: .master, on: db)
        await h.shutdown()
    }

    func testGeoPointIsMirroredAndOnlyOnePerClass() async throws {
        let h = try await AccountsHarness(prefix: "geo")
        let objects = h.accounts.objects, db = h.client
        let id = try await objects.create(className: "Place", body: ["location": ["__type": "GeoPoint", "latitude": 48.85, "longitude": 2.35]], auth: .anonymous, on: db)["objectId"]!.string!
        var distance = try await h.client.query("SELECT earth_distance(geo, ll_to_earth(48.85, 2.35)) AS d FROM objects WHERE object_id = $1", [.text(id)])
        XCTAssertEqual(distance.first?["d"].double ?? -1, 0, accuracy: 1)
        await XCTAssertParseError(111) {
            try await objects.create(className: "Place", body: ["other": ["__type": "GeoPoint", "latitude": 1, "longitude": 1]], auth: .anonymous, on: db)
        }
        _ = try await objects.update(className: "Place", objectId: id, body: ["location": ["__op": "Delete"]], auth: .anonymous, on: db)
        distance = try await h.client.query("SELECT geo IS NULL AS cleared FROM objects WHERE object_id = $1", [.text(id)])
        XCTAssertEqual(distance.first?["cleared"].bool, true)
        let geoField = try await h.accounts.schemas.geoField(className: "Place", on: db)
        XCTAssertEqual(geoField, "location")
        await XCTAssertParseError(107) {
            try await objects.create(className: "Place", body: ["location": ["__type": "GeoPoint", "latitude": 100, "longitude": 1]], auth: .anonymous, on: db)
        }
        await h.shutdown()
    }

    func testInstallationsUpsertLinkUserAndMasterOnlyDelete() async throws {
        let h = try await AccountsHarness(prefix: "inst")
        let installations = h.accounts.installations, db = h.client
        let alice = try await h.signUp("alice")
        let first = try await installations.save(body: ["installationId": "dev-1", "deviceType": "ios", "deviceToken": "tok"], auth: h.auth(alice), on: db)
        XCTAssertTrue(first.created)
        let id = try XCTUnwrap(first.json["objectId"]?.string)
        let second = try await installations.save(body: ["installationId": "dev-1", "deviceType": "ios", "voipDeviceToken": "voip", "badge": 1], auth: h.auth(alice), on: db)
        XCTAssertFalse(second.created)
        XCTAssertEqual(second.json["objectId"], .string(id))
        let row = try parsed(try await installations.get(objectId: id, auth: h.auth(alice), on: db))
        XCTAssertEqual(row["deviceToken"], "tok")
        XCTAssertEqual(row["voipDeviceToken"], "voip")
        XCTAssertEqual(row["badge"], 1)
        XCTAssertEqual(row["user"]?["objectId"], .string(alice.objectId), "linked to the session's user")

        await XCTAssertParseError(135) { try await installations.save(body: ["deviceType": "ios"], auth: .anonymous, on: db) }
        await XCTAssertParseError(135) { try await installations.save(body: ["installationId": "dev-2"], auth: .anonymous, on: db) }
        await XCTAssertParseError(111) { try await installations.save(body: ["installationId": "dev-2", "deviceType": ""], auth: .anonymous, on: db) }
        for type in ["osx", "tvos", "watchos", "win", "macos", "web", "embedded", "linux"] {
            let saved = try await installations.save(body: ["installationId": .string("dev-" + type), "deviceType": .string(type)], auth: .anonymous, on: db)
            let stored = try parsed(try await installations.get(objectId: try XCTUnwrap(saved.json["objectId"]?.string), auth: .anonymous, on: db))
            XCTAssertEqual(stored["deviceType"], .string(type), "Parse stores any deviceType")
        }
        let fromHeader = try await installations.save(body: ["deviceType": "android"], auth: Auth(isMaster: false, user: nil, installationId: "dev-3"), on: db)
        XCTAssertTrue(fromHeader.created)

        let upd = try await installations.update(objectId: id, body: ["deviceToken": "tok2", "badge": ["__op": "Increment"]], auth: h.auth(alice), on: db)
        XCTAssertEqual(upd["badge"], 2)
        await XCTAssertParseError(111) { try await installations.update(objectId: id, body: ["installationId": "changed"], auth: h.auth(alice), on: db) }
        await XCTAssertParseError(119) { try await installations.delete(objectId: id, auth: h.auth(alice), on: db) }
        try await installations.delete(objectId: id, auth: .master, on: db)
        await h.shutdown()
    }

    /// Nobody but its user and the master key changes an installation linked to a user, or sees its tokens.
    func testALinkedInstallationIsItsUsersOnly() async throws {
        let h = try await AccountsHarness(prefix: "instown")
        let installations = h.accounts.installations, db = h.client
        let alice = try await h.signUp("alice")
        let mallory = try await h.signUp("mallory")
        let saved = try await installations.save(body: ["installationId": "phone-a", "deviceType": "ios", "deviceToken": "apns-a", "voipDeviceToken": "voip-a"],
                                                 auth: h.auth(alice), on: db)
        let id = try XCTUnwrap(saved.json["objectId"]?.string)
        let stranger = Auth(isMaster: false, user: nil, installationId: "phone-a")
        for auth in [h.auth(mallory), .anonymous, stranger] {
            await XCTAssertParseError(101) { try await installations.update(objectId: id, body: ["deviceToken": "evil"], auth: auth, on: db) }
            await XCTAssertParseError(101) {
                try await installations.save(body: ["installationId": "phone-a", "deviceType": "ios", "voipDeviceToken": "evil"], auth: auth, on: db)
            }
            let seen = try parsed(try await installations.get(objectId: id, auth: auth, on: db))
            XCTAssertNil(seen["deviceToken"])
            XCTAssertNil(seen["voipDeviceToken"])
            XCTAssertEqual(seen["installationId"], "phone-a")
        }
        await XCTAssertParseError(101) { try await installations.save(body: ["deviceType": "ios", "deviceToken": "evil"], auth: stranger, on: db) }
        let mine = try parsed(try await installations.get(objectId: id, auth: h.auth(alice), on: db))
        XCTAssertEqual(mine["deviceToken"], "apns-a")
        XCTAssertEqual(mine["voipDeviceToken"], "voip-a")
        XCTAssertEqual(mine["user"]?["objectId"], .string(alice.objectId))
        _ = try await installations.update(objectId: id, body: ["deviceToken": "apns-m"], auth: .master, on: db)
        let asMaster = try parsed(try await installations.get(objectId: id, auth: .master, on: db))
        XCTAssertEqual(asMaster["deviceToken"], "apns-m")
        XCTAssertEqual(asMaster["user"]?["objectId"], .string(alice.objectId), "the master key's write keeps the user")
        await h.shutdown()
    }
}
