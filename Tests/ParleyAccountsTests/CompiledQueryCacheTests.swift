import ParleyAccounts
import ParleyJSON
import XCTest

/// The shape cache must return exactly what the compiler returns, for every query.
final class CompiledQueryCacheTests: XCTestCase {
    private func query(_ className: String, _ parameters: [(name: String, value: String)]) throws -> ParseQuery {
        try ParseQuery.fromRequest(className: className, parameters: parameters)
    }

    /// Compiles each query through `cache` and directly, and checks both agree (or both fail).
    private func assertAgrees(_ cache: CompiledQueryCache, _ className: String, _ parameters: [(name: String, value: String)],
                              readers: [String]?, file: StaticString = #filePath, line: UInt = #line) throws {
        let query = try query(className, parameters)
        let layout = TableLayout.forClass(className)
        let direct = Result { () throws(QueryError) -> CompiledQuery in try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readers) }
        let cached = Result { () throws(QueryError) -> CompiledQuery in try cache.compileSelect(query, layout: layout, readerIDs: readers) }
        switch (direct, cached) {
        case (.success(let a), .success(let b)):
            XCTAssertEqual(a, b, "\(className) \(parameters) readers \(readers ?? ["master"])", file: file, line: line)
        case (.failure(let a), .failure(let b)):
            XCTAssertEqual("\(a)", "\(b)", file: file, line: line)
        default:
            XCTFail("direct \(direct) but cached \(cached)", file: file, line: line)
        }
    }

    func testRepeatedShapesAreServedFromTheCacheWithTheirOwnValues() throws {
        let cache = CompiledQueryCache()
        let readerSets: [[String]?] = [nil, [], ["u1"], ["*"], ["u2"]]
        let wheres = [
            [#"{"username":"alice"}"#, #"{"username":"bob"}"#, #"{"username":"*"}"#, #"{"username":""}"#],
            [#"{"username":"u1","age":30}"#, #"{"username":"u2","age":-7}"#, #"{"username":"x","age":9223372036854775807}"#],
            [#"{"emailVerified":true}"#, #"{"emailVerified":false}"#],
            [#"{"username":true}"#, #"{"username":false}"#],
            [#"{"emailVerified":"yes"}"#, #"{"emailVerified":"no"}"#],
            [#"{"objectId":5}"#, #"{"objectId":6}"#],
            [#"{"a":"x","b":"x"}"#, #"{"a":"y","b":"z"}"#, #"{"a":"z","b":"y"}"#],
            [#"{"score":1.5,"flag":true,"name":"n"}"#, #"{"score":-0.25,"flag":false,"name":"m"}"#],
            [#"{"createdAt":"2024-01-01T00:00:00.000Z"}"#, #"{"createdAt":"2025-01-01T00:00:00.000Z"}"#, #"{"createdAt":"not a date"}"#],
            [#"{"age":{"$gt":3}}"#, #"{"age":{"$gt":4}}"#],
            [#"{"address":{"city":"Paris"}}"#, #"{"address":{"city":"Rome"}}"#],
            [#"{"a.b":"x"}"#, #"{"a.b":"y"}"#],
            [#"{"$or":[{"a":1},{"b":2}]}"#, #"{"$or":[{"a":3},{"b":4}]}"#],
            [#"{"password":"x"}"#, #"{"password":"y"}"#],
            [#"{"email":"a@b.c"}"#, #"{"email":"d@e.f"}"#],
            [#"{"bad name":"x"}"#, #"{"bad name":"y"}"#],
            [#"{"nul":"a\u0000"}"#, #"{"nul":"b"}"#, #"{"nul":"c\u0000"}"#],
        ]
        for readers in readerSets {
            for shape in wheres {
                for whereJSON in shape {
                    try assertAgrees(cache, "_User", [("where", whereJSON)], readers: readers)
                    try assertAgrees(cache, "_User", [("where", whereJSON), ("order", "-age,username"), ("limit", "7"), ("skip", "2")], readers: readers)
                    try assertAgrees(cache, "_User", [("where", whereJSON), ("keys", "age,name")], readers: readers)
                }
            }
            try assertAgrees(cache, "_User", [], readers: readers)
            try assertAgrees(cache, "_User", [("limit", "5")], readers: readers)
            for title in ["Post", "hello", "Other"] {
                try assertAgrees(cache, "Post", [("where", #"{"title":"\#(title)"}"#)], readers: readers)
                try assertAgrees(cache, "Other", [("where", #"{"title":"\#(title)"}"#)], readers: readers)
            }
            try assertAgrees(cache, "_Installation", [("where", #"{"deviceType":"ios"}"#)], readers: readers)
            try assertAgrees(cache, "_Installation", [("where", #"{"deviceType":"android"}"#)], readers: readers)
            try assertAgrees(cache, "_Session", [("where", #"{"installationId":"a"}"#)], readers: readers)
            try assertAgrees(cache, "_Session", [("where", #"{"installationId":"b"}"#)], readers: readers)
        }
        XCTAssertGreaterThan(cache.hits, 100)
    }

    func testOnlyPlainEqualityShapesAreCached() throws {
        let cache = CompiledQueryCache()
        let layout = TableLayout.users
        func hits(after whereJSONs: [String]) throws -> Int {
            let before = cache.hits
            for whereJSON in whereJSONs {
                _ = try? cache.compileSelect(try query("_User", [("where", whereJSON)]), layout: layout, readerIDs: [])
            }
            return cache.hits - before
        }
        XCTAssertEqual(try hits(after: [#"{"username":"a"}"#, #"{"username":"b"}"#, #"{"username":"c"}"#]), 2)
        XCTAssertEqual(try hits(after: [#"{"age":1,"name":"a"}"#, #"{"age":2,"name":"b"}"#]), 1)
        XCTAssertEqual(try hits(after: [#"{"name":"a","age":1}"#]), 0, "member order is part of the shape")
        XCTAssertEqual(try hits(after: [#"{"age":1.5}"#, #"{"age":2}"#]), 0, "so is the kind of each value")
        XCTAssertEqual(try hits(after: [#"{"age":{"$gt":1}}"#, #"{"age":{"$gt":2}}"#]), 0)
        XCTAssertEqual(try hits(after: [#"{"createdAt":"2024-01-01T00:00:00Z"}"#, #"{"createdAt":"2024-01-02T00:00:00Z"}"#]), 0,
                       "a date string is parsed, not passed through")
        XCTAssertEqual(try hits(after: [#"{"username":"a\u0000"}"#]), 0)
        let remembered = cache.count
        XCTAssertEqual(try hits(after: [#"{"username":"d"}"#]), 1)
        XCTAssertEqual(cache.count, remembered)
    }

    func testCapacityBoundsTheShapesRemembered() throws {
        let cache = CompiledQueryCache(capacity: 3)
        for field in ["a", "b", "c", "d", "e"] {
            _ = try cache.compileSelect(try query("_User", [("where", #"{"\#(field)":"x"}"#)]), layout: .users, readerIDs: [])
        }
        XCTAssertEqual(cache.count, 3)
        let recent = try query("_User", [("where", #"{"e":"y"}"#)])
        XCTAssertEqual(try cache.compileSelect(recent, layout: .users, readerIDs: []),
                       try QueryCompiler.compileSelect(recent, layout: .users, readerIDs: []))
        XCTAssertEqual(cache.hits, 1)
    }
}
