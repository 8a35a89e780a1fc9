import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

extension QueryTestDatabase: SQLExecutor {
    func query(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows {
        try connection.query(sql, params)
    }
}

/// `QueryRunner.findJSON` writes rows straight to bytes; it must give exactly the bytes of
/// `find`'s objects serialized, whatever the rows hold.
final class QueryResultJSONTests: XCTestCase {
    private static let seeded: Result<QueryTestDatabase, Error> = Result { try seed() }
    /// Shared, so repeated query shapes come from its compiled-query cache.
    private static let runner = QueryRunner()

    private static func seed() throws -> QueryTestDatabase {
        let db = try QueryTestDatabase(prefix: "query_json")
        try db.insertUser("u1", username: "alice", email: "alice@example.com", data: [
            "age": 30, "score": 10.5, "big": .double(1e300), "whole": .double(2), "name": "Al\"ice\\\n\u{1}é😀",
            "tags": ["a", 1, nil, true], "address": ["city": "Paris", "zip": ["n": 75001]],
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

    /// `find` serialized the way the endpoint used to: `{"results":[…],"count":n}`.
    private func expected(_ query: ParseQuery, auth: Auth) async throws -> String {
        let (results, count) = try await QueryRunner().find(query, auth: auth, on: db)
        var body: JSONObject = ["results": .array(results.map(JSONValue.object))]
        if let count { body["count"] = .int(Int64(count)) }
        return JSONValue.object(body).serialized()
    }

    private func assertSameJSON(_ className: String, _ parameters: [(name: String, value: String)], file: StaticString = #filePath,
                                line: UInt = #line) async throws {
        let query = try ParseQuery.fromRequest(className: className, parameters: parameters)
        for auth in [Auth.anonymous, Auth.master, Self.user("u1"), Self.user("u2")] {
            let written = String(decoding: try await Self.runner.findJSON(query, auth: auth, on: db), as: UTF8.self)
            let built = try await expected(query, auth: auth)
            XCTAssertEqual(written, built, "\(className) \(parameters) as \(auth.isMaster ? "master" : auth.userId ?? "anonymous")",
                           file: file, line: line)
        }
    }

    func testUserRowsAreWrittenExactlyAsTheirObjectsSerialize() async throws {
        try await assertSameJSON("_User", [])
        try await assertSameJSON("_User", [("where", #"{"username":"alice"}"#)])
        try await assertSameJSON("_User", [("order", "-username"), ("count", "1")])
        try await assertSameJSON("_User", [("limit", "0"), ("count", "1")])
        try await assertSameJSON("_User", [("where", #"{"username":"nobody"}"#)])
        // (keys read `data` with jsonb_each, which refuses u4's non-object data.)
        try await assertSameJSON("_User", [("keys", "age,createdAt,email"), ("where", #"{"objectId":{"$ne":"u4"}}"#)])
        let all = String(decoding: try await QueryRunner().findJSON(ParseQuery.fromRequest(className: "_User", parameters: []),
                                                                   auth: .anonymous, on: db), as: UTF8.self)
        XCTAssertTrue(all.contains(#""createdAt":"1969-12-31T23:59:59.999Z""#), all)
        XCTAssertTrue(all.contains(#""ACL":{"kept":true}"#), all)
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

    func testObjectRowsAreWrittenExactlyAsTheirObjectsSerialize() async throws {
        try await assertSameJSON("Post", [])
        try await assertSameJSON("Post", [("where", #"{"title":"hello"}"#), ("count", "1")])
        try await assertSameJSON("Post", [("keys", "title")])
        try await assertSameJSON("Nothing", [])
    }
}
