import ParleyAccounts
import ParleyJSON
import XCTest

/// `ParseQuery.fromRequest` / `fromJSON`: query-string and body parameters with Parse's codes.
final class QueryRequestTests: XCTestCase {
    private func parse(_ parameters: [(String, String)]) throws -> ParseQuery {
        try ParseQuery.fromRequest(className: "_User", parameters: parameters.map { (name: $0.0, value: $0.1) })
    }

    private func assertError(_ parameters: [(String, String)], code: Int, mentioning text: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(parameters), file: file, line: line) { error in
            guard let error = error as? QueryError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
            XCTAssertTrue(error.message.contains(text), "\(error.message) should mention \(text)", file: file, line: line)
        }
    }

    func testDefaults() throws {
        let query = try parse([])
        XCTAssertEqual(query, ParseQuery(className: "_User", where: nil, order: [], limit: 100, skip: 0, keys: nil, count: false))
        XCTAssertTrue(query.returns("anything"))
    }

    func testEveryParameter() throws {
        let query = try parse([
            ("where", #"{"username":"x"}"#), ("order", "-createdAt, score,-a.b"), ("limit", "20"), ("skip", "40"),
            ("keys", "name, age,name"), ("count", "1"), ("_method", "GET"), ("readPreference", "SECONDARY"), ("include", ""),
        ])
        XCTAssertEqual(query.where, ["username": "x"])
        XCTAssertEqual(query.order, [.init(field: "createdAt", descending: true), .init(field: "score"), .init(field: "a.b", descending: true)])
        XCTAssertEqual(query.limit, 20)
        XCTAssertEqual(query.skip, 40)
        XCTAssertEqual(query.keys, ["name", "age"])
        XCTAssertTrue(query.count)
        XCTAssertEqual(try parse([("count", "0"), ("limit", "0"), ("keys", "")]), ParseQuery(className: "_User", limit: 0, keys: []))
    }

    func testLimitIsCappedAndValidated() throws {
        XCTAssertEqual(try parse([("limit", "5000")]).limit, 1000)
        XCTAssertEqual(try parse([("limit", "99999999999999999999999")]).limit, 1000)
        assertError([("limit", "-1")], code: 102, mentioning: "limit")
        assertError([("limit", "ten")], code: 102, mentioning: "limit")
        assertError([("limit", "1.5")], code: 102, mentioning: "limit")
        XCTAssertEqual(try parse([("skip", "100000")]).skip, 100_000)
        assertError([("skip", "100001")], code: 102, mentioning: "skip")
        assertError([("skip", "-5")], code: 102, mentioning: "skip")
        assertError([("count", "2")], code: 102, mentioning: "count")
    }

    func testWhereMustBeAJSONObject() throws {
        assertError([("where", #"{"username":"#)], code: 107, mentioning: "where")
        assertError([("where", "{'a':1}")], code: 107, mentioning: "where")
        assertError([("where", "[]")], code: 102, mentioning: "object")
        assertError([("where", "\"x\"")], code: 102, mentioning: "object")
        XCTAssertNil(try parse([("where", "")]).where)
        let deep = String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40)
        assertError([("where", deep)], code: 107, mentioning: "nesting")
        let huge = #"{"a":""# + String(repeating: "x", count: ParseQuery.maxWhereBytes) + #""}"#
        assertError([("where", huge)], code: 107, mentioning: "exceeds")
    }

    func testOrderAndKeysAreFieldNames() throws {
        assertError([("order", "a,,b")], code: 102, mentioning: "empty")
        assertError([("order", "name; DROP TABLE users")], code: 102, mentioning: "DROP")
        assertError([("order", "--a")], code: 102, mentioning: "--a")
        assertError([("keys", "a..b")], code: 102, mentioning: "a..b")
        assertError([("keys", "a)")], code: 102, mentioning: "a)")
    }

    func testUnsupportedAndUnknownParametersAreNamed() throws {
        assertError([("include", "own-er")], code: 102, mentioning: "include")
        assertError([("excludeKeys", "a,$b")], code: 102, mentioning: "excludeKeys")
        assertError([("explain", "true")], code: 102, mentioning: "explain")
        assertError([("frobnicate", "1")], code: 102, mentioning: "Invalid parameter for query: frobnicate")
        assertError([("where", "{}"), ("where", "{}")], code: 102, mentioning: "twice")
        for name in ["order", "limit", "skip", "keys", "count"] {
            assertError([(name, ""), ("where", "{}"), (name, "")], code: 102, mentioning: "\(name) is given twice")
        }
        assertError([("include", ""), ("include", "")], code: 102, mentioning: "include is given twice")
        XCTAssertEqual(try parse([("_method", "GET"), ("_method", "GET"), ("hint", "a"), ("hint", "b")]), try parse([]))
    }

    func testJSONBodyForm() throws {
        let body: JSONObject = [
            "_method": "GET", "_ApplicationId": "app", "where": ["age": ["$gt": 3]], "limit": 10, "skip": "5",
            "order": "-age", "keys": ["name", "age"], "count": 1,
        ]
        let query = try ParseQuery.fromJSON(className: "Thing", body: body)
        XCTAssertEqual(query, ParseQuery(className: "Thing", where: ["age": ["$gt": 3]], order: [.init(field: "age", descending: true)],
                                         limit: 10, skip: 5, keys: ["name", "age"], count: true))
        XCTAssertEqual(try ParseQuery.fromJSON(className: "T", body: ["where": #"{"a":1}"#, "count": true, "limit": 2.0]),
                       ParseQuery(className: "T", where: ["a": 1], limit: 2, count: true))
        XCTAssertThrowsError(try ParseQuery.fromJSON(className: "T", body: ["where": [1]])) { error in
            XCTAssertEqual((error as? QueryError)?.code, 102)
        }
        XCTAssertThrowsError(try ParseQuery.fromJSON(className: "T", body: ["limit": 2.5])) { error in
            XCTAssertEqual((error as? QueryError)?.code, 102)
        }
        XCTAssertEqual(try ParseQuery.fromJSON(className: "T", body: ["include": "x,"]).shape.include, [["x"]], "an empty entry is skipped")
        XCTAssertEqual(try ParseQuery.fromJSON(className: "T", body: ["include": ["a.b", "c"]]).shape.include, [["a"], ["c"], ["a", "b"]])
    }
}
