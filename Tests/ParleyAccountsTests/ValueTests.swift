import ParleyAccounts
import ParleyJSON
import XCTest

final class ValueTests: XCTestCase {
    func testTypesAndNormalisation() throws {
        XCTAssertEqual(try ParseValue.normalise("x").type, .string)
        XCTAssertEqual(try ParseValue.normalise(3).type, .number)
        XCTAssertEqual(try ParseValue.normalise(2.5).type, .number)
        XCTAssertEqual(try ParseValue.normalise(true).type, .boolean)
        XCTAssertEqual(try ParseValue.normalise([1, 2]).type, .array)
        XCTAssertEqual(try ParseValue.normalise(["a": 1]).type, .object)
        XCTAssertNil(try ParseValue.normalise(nil).type)
        let date = try ParseValue.normalise(["__type": "Date", "iso": "2026-01-02T03:04:05Z"])
        XCTAssertEqual(date.type, .date)
        XCTAssertEqual(date.value["iso"], "2026-01-02T03:04:05.000Z")
        let pointer = try ParseValue.normalise(["__type": "Pointer", "className": "_User", "objectId": "abc123"])
        XCTAssertEqual(pointer.type, .pointer(targetClass: "_User"))
        XCTAssertEqual(try ParseValue.normalise(["__type": "GeoPoint", "latitude": 1, "longitude": 2]).type, .geoPoint)
        XCTAssertEqual(try ParseValue.normalise(["__type": "Bytes", "base64": "aGk="]).type, .bytes)
    }

    func testBadValuesGetParseCodes() {
        func code(_ value: JSONValue) -> Int? {
            do { _ = try ParseValue.normalise(value); return nil } catch { return error.code }
        }
        XCTAssertEqual(code(["__type": "Date", "iso": "yesterday"]), 111)
        XCTAssertEqual(code(["__type": "GeoPoint", "latitude": 91, "longitude": 0]), 107)
        XCTAssertEqual(code(["__type": "GeoPoint", "latitude": 0, "longitude": -181]), 107)
        XCTAssertEqual(code(["__type": "Pointer", "className": "1bad", "objectId": "x"]), 106)
        XCTAssertEqual(code(["__type": "Polygon", "coordinates": [[0, 0]]]), 111)
        XCTAssertNil(code(["__type": "File", "name": "a.png", "url": "http://h/a.png"]), "File values are stored (docs/files.md)")
        XCTAssertEqual(code(["__type": "File"]), 111)
        XCTAssertEqual(code("nul\u{0}inside"), 107)
        XCTAssertEqual(code(["k\u{0}": 1]), 107)
    }

    func testWritePlanSplitsBody() throws {
        let plan = try WritePlan(body: [
            "name": "a", "score": ["__op": "Increment", "amount": 2], "tags": ["__op": "AddUnique", "objects": ["x", "x", "y"]],
            "gone": ["__op": "Delete"], "createdAt": "ignored", "ACL": ["*": ["read": true]],
            "where": ["__type": "GeoPoint", "latitude": 10, "longitude": 20],
        ], isCreate: false)
        XCTAssertEqual(plan.sets.map(\.field), ["name", "where"])
        XCTAssertEqual(plan.operations.map(\.field), ["score", "tags", "gone"])
        XCTAssertEqual(plan.operations[1].operation, .addUnique(["x", "y"]))
        XCTAssertEqual(plan.clearedFields, ["gone"])
        XCTAssertEqual(plan.geoPoint?.field, "where")
        XCTAssertEqual(plan.acl??.readers, ["*"])
        XCTAssertEqual(plan.acl??.writers, [])
        XCTAssertThrowsError(try WritePlan(body: ["bad-name": 1], isCreate: true)) { XCTAssertEqual(($0 as? ParseError)?.code, 105) }
        XCTAssertThrowsError(try WritePlan(body: ["objectId": "x"], isCreate: true)) { XCTAssertEqual(($0 as? ParseError)?.code, 105) }
        XCTAssertThrowsError(try WritePlan(body: ["n": ["__op": "Multiply"]], isCreate: true)) { XCTAssertEqual(($0 as? ParseError)?.code, 111) }
        XCTAssertThrowsError(try WritePlan(body: ["ACL": ["*": ["read": "yes"]]], isCreate: true)) { XCTAssertEqual(($0 as? ParseError)?.code, 123) }
    }

    func testClassNames() {
        XCTAssertTrue(ClassName.isValid("GameScore"))
        XCTAssertTrue(ClassName.isValid("a_1"))
        XCTAssertFalse(ClassName.isValid("_User"))
        XCTAssertFalse(ClassName.isValid("1a"))
        XCTAssertFalse(ClassName.isValid("a-b"))
        XCTAssertFalse(ClassName.isValid(""))
        XCTAssertTrue(ClassName.isSystem("_User"))
    }

    func testSessionCacheBoundsTTLAndInvalidation() {
        let now = ManagedTime()
        let cache = SessionCache(capacity: 2, ttlSeconds: 10, clock: { now.value })
        let a = SessionInfo(sessionId: "s1", token: "t1", userId: "u1", expiresAt: 1_000_000, installationId: nil)
        let b = SessionInfo(sessionId: "s2", token: "t2", userId: "u1", expiresAt: 1_000_000, installationId: nil)
        let c = SessionInfo(sessionId: "s3", token: "t3", userId: "u2", expiresAt: 1_000_000, installationId: nil)
        cache.put(a, since: cache.mark()); cache.put(b, since: cache.mark()); cache.put(c, since: cache.mark())
        XCTAssertEqual(cache.count, 2)
        XCTAssertNil(cache.get("t1"), "oldest evicted")
        XCTAssertEqual(cache.get("t2"), b)
        cache.invalidate(userId: "u1")
        XCTAssertNil(cache.get("t2"))
        XCTAssertEqual(cache.get("t3"), c)
        now.value += 10_000
        XCTAssertNil(cache.get("t3"), "TTL")
        let expired = SessionInfo(sessionId: "s4", token: "t4", userId: "u3", expiresAt: now.value - 1, installationId: nil)
        cache.put(expired, since: cache.mark())
        XCTAssertNil(cache.get("t4"), "expired sessions are never served")
    }

    func testSessionCacheFindsTokensByTheirBytes() {
        let cache = SessionCache(capacity: 8, ttlSeconds: 10, clock: { 0 })
        let long = SessionInfo(sessionId: "s1", token: "r:0123456789abcdef0123456789abcdef", userId: "u1", expiresAt: 1, installationId: nil)
        let short = SessionInfo(sessionId: "s2", token: "r:ab", userId: "u2", expiresAt: 1, installationId: "i")
        cache.put(long, since: cache.mark())
        cache.put(short, since: cache.mark())
        func get(_ text: String) -> SessionInfo? { Array(text.utf8).withUnsafeBufferPointer { cache.get(token: $0) } }
        XCTAssertEqual(get(long.token), long)
        XCTAssertEqual(get(short.token), short)
        XCTAssertNil(get("r:0123456789abcdef0123456789abcdeF"), "one byte differs")
        XCTAssertNil(get("r:0123456789abcdef0123456789abcde"), "a prefix")
        XCTAssertNil(get("r:AB"), "tokens are compared exactly")
        XCTAssertNil(get(""))
        cache.invalidate(token: long.token)
        XCTAssertNil(get(long.token))
        XCTAssertEqual(cache.get(short.token), short)
        cache.put(short, since: cache.mark())
        XCTAssertEqual(cache.count, 1, "putting a token again replaces its entry")
        cache.invalidate(userId: "u2")
        XCTAssertNil(get(short.token))
        XCTAssertEqual(cache.count, 0)
    }

    func testSessionCacheKeepsNothingInvalidatedWhileItWasRead() {
        let cache = SessionCache(capacity: 8, ttlSeconds: 10, clock: { 0 })
        let a = SessionInfo(sessionId: "s1", token: "t1", userId: "u1", expiresAt: 1, installationId: nil)
        let b = SessionInfo(sessionId: "s2", token: "t2", userId: "u2", expiresAt: 1, installationId: nil)
        // A read began, then an event invalidated a user (any user): its answer may be stale.
        var mark = cache.mark()
        cache.invalidate(userId: "u1")
        cache.put(a, since: mark)
        XCTAssertNil(cache.get("t1"), "read before the invalidation: not cached")
        mark = cache.mark()
        cache.invalidate(token: "t9")
        cache.put(b, since: mark)
        XCTAssertNil(cache.get("t2"), "any invalidation counts")
        mark = cache.mark()
        cache.put(a, since: mark)
        XCTAssertEqual(cache.get("t1"), a)

        // Suspended (events may be missed): nothing served, nothing kept, until resumed.
        cache.suspend()
        XCTAssertFalse(cache.isTrusted)
        XCTAssertNil(cache.get("t1"), "suspending drops what was cached")
        cache.put(b, since: cache.mark())
        XCTAssertNil(cache.get("t2"), "nothing is cached while suspended")
        mark = cache.mark()
        cache.resume()
        cache.put(b, since: mark)
        XCTAssertNil(cache.get("t2"), "a read that began while suspended is not kept")
        cache.put(b, since: cache.mark())
        XCTAssertEqual(cache.get("t2"), b)
    }

    func testUserCacheSerializedAddsTheSessionToken() throws {
        let now = ManagedTime()
        let cache = UserCache(capacity: 4, ttlMilliseconds: 1000, clock: { now.value })
        let user: JSONObject = ["objectId": "u1", "username": "al\"ice", "n": 3]
        cache.put("u1", SessionUserJSON(user: Array(JSONValue.object(user).serialized().utf8)))
        cache.put("empty", SessionUserJSON(user: Array("{}".utf8)))
        for token in ["r:0123456789abcdef", "", "odd\"to\\ken\n\u{1}", "ünï"] {
            var expected = user
            expected["sessionToken"] = .string(token)
            let bytes = try XCTUnwrap(cache.serialized("u1", sessionToken: token))
            XCTAssertEqual(try JSONParser().parse(bytes), .object(expected), token)
            XCTAssertEqual(try JSONParser().parse(XCTUnwrap(cache.serialized("empty", sessionToken: token))),
                           .object(["sessionToken": .string(token)]), token)
        }
        XCTAssertEqual(
            cache.serialized("u1", sessionToken: "t").map { String(decoding: $0, as: UTF8.self) },
            #"{"objectId":"u1","username":"al\"ice","n":3,"sessionToken":"t"}"#)
        XCTAssertNil(cache.serialized("nobody", sessionToken: "t"))
        now.value += 1000
        XCTAssertNil(cache.serialized("u1", sessionToken: "t"), "TTL")
    }
}

final class ManagedTime: @unchecked Sendable {
    var value: Int64 = 0
}
