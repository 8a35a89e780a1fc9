import ParleyAccounts
import ParleyJSON
import ParleyLog
import ParleyPostgres
import XCTest

extension QueryTestDatabase: SQLExecutor {
    func query(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows {
        try connection.query(sql, params)
    }
}

/// `RowJSON`, the one row serializer, writes rows straight to bytes, copying `data` from
/// PostgreSQL's `jsonb` text. Its answers are checked against Parse's member rules spelled out
/// here with `JSONObject` (`expected`), over the same rows, whatever the rows hold: the typed
/// members first (`email` only for the user itself or the master key), then the `data` members
/// they do not shadow, then `createdAt`, `updatedAt` and `ACL` replacing a same-named member in
/// place; with `keys`, only those plus the members Parse always returns.
final class QueryResultJSONTests: XCTestCase {
    private static let seeded: Result<QueryTestDatabase, Error> = Result { try seed() }
    /// Shared, so repeated query shapes come from its compiled-query cache.
    private static let runner = QueryRunner()

    private static func seed() throws -> QueryTestDatabase {
        let db = try QueryTestDatabase(prefix: "query_json")
        try db.insertUser("u1", username: "alice", email: "alice@example.com", data: [
            "age": 30, "score": 10.5, "big": .double(1e300), "whole": .double(2), "name": "Al\"ice\\\n\u{1}é😀",
            "tags": ["a", 1, nil, true], "address": ["city": "Paris", "zip": ["n": 75001]],
            "we\"ird key": ["x": [1, ["y": "a}b\"] , c"]], "z": nil, "e": [:], "f": []], "spaced out": " a : b , ",
        ], createdAt: "2024-01-01T00:00:01.123Z")
        // Data members named like the fixed members and the metadata.
        try db.insertUser("u2", username: "bob", email: "bob@example.com", data: [
            "objectId": "fake", "username": "fake", "email": "fake@example.com", "emailVerified": "fake",
            "createdAt": "fake", "updatedAt": "fake", "ACL": "fake", "x": 1,
        ], createdAt: "1969-12-31T23:59:59.999Z")
        try db.insertUser("u3", username: "carol", data: ["ACL": ["kept": true], "\u{212A}elvin": 1, "K": 2])
        try db.insertUser("u4", username: "dave\u{301}", data: [:])
        try db.connection.query("""
            UPDATE users SET email_verified = true, acl = '{"*":{"read":true},"u1":{"write":true}}' WHERE object_id = 'u1';
            """)
        try db.connection.query("UPDATE users SET email_verified = false, acl = '[1, \"two\"]' WHERE object_id = 'u2'")
        try db.connection.query("UPDATE users SET data = '\"not an object\"' WHERE object_id = 'u4'")
        // Timestamps in every shape PostgreSQL prints (the writer rewrites the usual one in place).
        try db.insertUser("t1", username: "t-whole-second", createdAt: "2024-02-29T12:00:00Z")
        try db.insertUser("t2", username: "t-micro", createdAt: "2024-05-06T07:08:09.123456Z")
        try db.insertUser("t3", username: "t-tenth", createdAt: "1999-12-31T23:59:59.1Z")
        try db.insertUser("t4", username: "t-far", createdAt: "12345-01-01T00:00:00Z")
        try db.insertUser("t5", username: "t-bc", createdAt: "0044-03-15T12:00:00Z")
        try db.connection.query("UPDATE users SET created_at = '0044-03-15 12:00:00+00 BC', updated_at = 'infinity' WHERE object_id = 't5'")
        try db.connection.query("UPDATE users SET updated_at = '-infinity' WHERE object_id = 't4'")
        try db.insertObject("Post", "p1", data: ["title": "hello", "createdAt": "shadowed", "objectId": "fake", "n": 1.5])
        try db.insertObject("Post", "p2", data: ["ACL": "kept: the row has no acl"])
        try db.connection.query(#"UPDATE objects SET acl = '{"*":{"read":true}}' WHERE object_id = 'p1'"#)
        return db
    }

    private var db: QueryTestDatabase {
        get throws { try Self.seeded.get() }
    }

    private static func user(_ id: String) -> Auth {
        Auth(isMaster: false, user: SessionInfo(sessionId: "s", token: "t", userId: id, expiresAt: .max, installationId: nil),
             installationId: nil)
    }

    /// The response body by Parse's rules, from the rows of the same SELECT.
    private func expected(_ query: ParseQuery, auth: Auth) throws -> String {
        let layout = TableLayout.forClass(query.className)
        let readers: [String]? = auth.isMaster ? nil : (auth.userId.map { [$0] } ?? [])
        var results: [JSONValue] = []
        if query.limit > 0 {
            for row in try db.rows(query, layout: layout, readers: readers) {
                results.append(.object(Self.select(Self.object(row, className: query.className, viewer: auth), keys: query.keys)))
            }
        }
        var body: JSONObject = ["results": .array(results)]
        if query.count {
            let compiled = try QueryCompiler.compileCount(query, layout: layout, readerIDs: readers)
            body["count"] = .int(Int64(try db.connection.query(compiled.sql, compiled.parameters).first?["count"].int ?? 0))
        }
        return JSONValue.object(body).serialized()
    }

    private static func object(_ row: PostgresRow, className: String, viewer: Auth) -> JSONObject {
        let objectId = row["object_id"].string ?? ""
        var object: JSONObject = ["objectId": .string(objectId)]
        if className == ClassName.user {
            object["username"] = .string(row["username"].string ?? "")
            if viewer.isMaster || viewer.userId == objectId, let email = row["email"].string { object["email"] = .string(email) }
            if let verified = row["email_verified"].bool { object["emailVerified"] = .bool(verified) }
        }
        if let text = row["data"].json, case .object(let data)? = try? JSONParser().parse(text) {
            for (key, value) in data where object[key] == nil && (className != ClassName.user || key != "sessionToken") { object[key] = value }
        }
        if let created = row["created_at"].timestampMilliseconds { object["createdAt"] = .string(UTCTime.iso8601(milliseconds: created)) }
        if let updated = row["updated_at"].timestampMilliseconds { object["updatedAt"] = .string(UTCTime.iso8601(milliseconds: updated)) }
        if let text = row["acl"].json, let acl = try? JSONParser().parse(text) { object["ACL"] = acl }
        return object
    }

    private static func select(_ object: JSONObject, keys: [String]?) -> JSONObject {
        guard let keys else { return object }
        let wanted = Set(keys).union(["objectId", "createdAt", "updatedAt", "ACL", "sessionToken"])
        return JSONObject(object.filter { wanted.contains($0.key) }.map { ($0.key, $0.value) })
    }

    private func assertSameJSON(_ className: String, _ parameters: [(name: String, value: String)], file: StaticString = #filePath,
                                line: UInt = #line) async throws {
        let query = try ParseQuery.fromRequest(className: className, parameters: parameters)
        for auth in [Auth.anonymous, Auth.master, Self.user("u1"), Self.user("u2")] {
            let written = String(decoding: try await Self.runner.find(query, auth: auth, on: db), as: UTF8.self)
            let built = try expected(query, auth: auth)
            let context = "\(className) \(parameters) as \(auth.isMaster ? "master" : auth.userId ?? "anonymous")"
            XCTAssertTrue(Self.sameJSON(try JSONParser().parse(written), try JSONParser().parse(built)),
                          "\(context):\n\(written)\n\(built)", file: file, line: line)
        }
    }

    /// Equal JSON: member order and strings exactly, numbers by value (`2.0` is `2`).
    private static func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.int, _), (.double, _): return a.double != nil && a.double == b.double
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameJSON($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && sameJSON($0.value, $1.value) }
        default: return false
        }
    }

    func testUserRowsFollowParsesMemberRules() async throws {
        try await assertSameJSON("_User", [])
        try await assertSameJSON("_User", [("where", #"{"username":"alice"}"#)])
        try await assertSameJSON("_User", [("order", "-username"), ("count", "1")])
        try await assertSameJSON("_User", [("limit", "0"), ("count", "1")])
        try await assertSameJSON("_User", [("where", #"{"username":"nobody"}"#)])
        // (keys read `data` with jsonb_each, which refuses u4's non-object data.)
        try await assertSameJSON("_User", [("keys", "age,createdAt,email"), ("where", #"{"objectId":{"$ne":"u4"}}"#)])
        let all = String(decoding: try await QueryRunner().find(ParseQuery.fromRequest(className: "_User", parameters: []),
                                                                   auth: .anonymous, on: db), as: UTF8.self)
        XCTAssertTrue(all.contains(#""createdAt":"1969-12-31T23:59:59.999Z""#), all)
        XCTAssertTrue(all.contains(#""ACL":{"kept":true}"#), all)
        XCTAssertTrue(all.contains(#""createdAt":"2024-02-29T12:00:00.000Z""#), all)
        XCTAssertTrue(all.contains(#""createdAt":"2024-05-06T07:08:09.123Z""#), all)
        XCTAssertTrue(all.contains(#""createdAt":"1999-12-31T23:59:59.100Z""#), all)
    }

    func testRepeatedShapesGiveTheRowsOfTheirOwnValues() async throws {
        for name in ["alice", "bob", "carol", "nobody", "alice"] {
            try await assertSameJSON("_User", [("where", #"{"username":"\#(name)"}"#)])
        }
        for title in ["hello", "world", "hello"] {
            try await assertSameJSON("Post", [("where", #"{"title":"\#(title)"}"#)])
        }
        XCTAssertGreaterThan(Self.runner.compiledQueries.hits, 0)
    }

    func testObjectRowsFollowParsesMemberRules() async throws {
        try await assertSameJSON("Post", [])
        try await assertSameJSON("Post", [("where", #"{"title":"hello"}"#), ("count", "1")])
        try await assertSameJSON("Post", [("keys", "title")])
        try await assertSameJSON("Nothing", [])
    }
}
