import ParleyJSON
import XCTest

final class JSONValueTests: XCTestCase {
    func testLiterals() {
        let value: JSONValue = ["s": "text", "i": 7, "d": 2.5, "b": true, "n": nil, "a": [1, "x"], "o": ["k": false]]
        XCTAssertEqual(value["s"], .string("text"))
        XCTAssertEqual(value["i"], .int(7))
        XCTAssertEqual(value["d"], .double(2.5))
        XCTAssertEqual(value["b"], .bool(true))
        XCTAssertEqual(value["n"], .null)
        XCTAssertEqual(value["a"], .array([.int(1), .string("x")]))
        XCTAssertEqual(value["o"], .object(JSONObject([("k", .bool(false))])))
        let name = "world"
        XCTAssertEqual("hello \(name)" as JSONValue, .string("hello world"))
    }

    func testAccessors() {
        let value: JSONValue = ["s": "text", "i": 7, "d": 2.5, "whole": 3.0, "huge": 1e300, "b": false, "n": nil, "a": [10, 20]]
        XCTAssertEqual(value["s"]?.string, "text")
        XCTAssertNil(value["s"]?.int)
        XCTAssertEqual(value["i"]?.int, 7)
        XCTAssertEqual(value["i"]?.double, 7.0)
        XCTAssertEqual(value["d"]?.double, 2.5)
        XCTAssertNil(value["d"]?.int, "a fractional double is not an integer")
        XCTAssertEqual(value["whole"]?.int, 3)
        XCTAssertNil(value["huge"]?.int)
        XCTAssertEqual(value["b"]?.bool, false)
        XCTAssertNil(value["i"]?.bool)
        XCTAssertEqual(value["n"]?.isNull, true)
        XCTAssertEqual(value["s"]?.isNull, false)
        XCTAssertEqual(value["a"]?.array, [10, 20])
        XCTAssertEqual(value["a"]?[1], .int(20))
        XCTAssertNil(value["a"]?[2])
        XCTAssertNil(value["a"]?[-1])
        XCTAssertNil(value["missing"])
        XCTAssertNil(value["s"]?["x"], "subscripting a non-object gives nil")
        XCTAssertNil(value[0], "indexing a non-array gives nil")
        XCTAssertEqual(value.object?.count, 8)
        XCTAssertNil(value["a"]?.object)
        XCTAssertNil(value.string)
    }

    func testSettingMembers() {
        var value: JSONValue = ["a": 1, "b": 2]
        value["c"] = "new"
        value["a"] = .null
        value["b"] = nil
        XCTAssertEqual(value.object?.keys, ["a", "c"])
        XCTAssertEqual(value["a"], .null)
        XCTAssertEqual(value.serialized(), #"{"a":null,"c":"new"}"#)
    }

    func testObjectOperations() {
        var object: JSONObject = ["x": 1, "y": 2, "x": 3]
        XCTAssertEqual(object.keys, ["x", "y"])
        XCTAssertEqual(object["x"], .int(3))
        XCTAssertEqual(object.updateValue(4, forKey: "y"), .int(2))
        XCTAssertNil(object.updateValue(5, forKey: "z"))
        XCTAssertEqual(object.values, [3, 4, 5])
        XCTAssertTrue(object.contains(key: "z"))
        XCTAssertEqual(object.removeValue(forKey: "x"), .int(3))
        XCTAssertNil(object.removeValue(forKey: "x"))
        XCTAssertEqual(object.keys, ["y", "z"])
        XCTAssertEqual(object.map(\.key), ["y", "z"])
        XCTAssertEqual(object[0].value, .int(4))
        XCTAssertFalse(object.isEmpty)
        XCTAssertTrue(JSONObject().isEmpty)
    }

    func testLargeObjectIndexStaysConsistent() {
        var object = JSONObject()
        for number in 0..<50 {
            object["key\(number)"] = .int(Int64(number))
        }
        XCTAssertEqual(object.count, 50)
        XCTAssertEqual(object["key37"], .int(37))
        object["key10"] = nil
        object["key20"] = "replaced"
        XCTAssertNil(object["key10"])
        XCTAssertEqual(object["key49"], .int(49))
        XCTAssertEqual(object["key20"], .string("replaced"))
        XCTAssertEqual(object.keys.firstIndex(of: "key20"), 19)
        for number in 0..<45 where number != 10 {
            object["key\(number)"] = nil
        }
        XCTAssertEqual(object.keys, ["key45", "key46", "key47", "key48", "key49"])
        XCTAssertEqual(object["key47"], .int(47))
        object["key0"] = 0
        XCTAssertEqual(object.keys.last, "key0")
    }

    func testEqualityIgnoresKeyOrderButNotCase() {
        let first: JSONValue = ["a": 1, "b": [1, 2]]
        let second: JSONValue = ["b": [1, 2], "a": 1]
        XCTAssertEqual(first, second)
        XCTAssertEqual(first.hashValue, second.hashValue)
        XCTAssertNotEqual(first, ["a": 1, "b": [2, 1]])
        XCTAssertNotEqual(first, ["a": 1])
        XCTAssertNotEqual(first, ["a": 1, "b": [1, 2], "c": nil])
        XCTAssertNotEqual(JSONValue.int(1), .double(1))
        XCTAssertNotEqual(JSONValue.null, .bool(false))
        XCTAssertNotEqual(JSONValue.string("1"), .int(1))
    }

    func testHashableInSets() {
        let set: Set<JSONValue> = [1, 1, "1", ["a": 1, "b": 2], ["b": 2, "a": 1], nil, nil, [1, 2]]
        XCTAssertEqual(set.count, 5)
        XCTAssertTrue(set.contains(["b": 2, "a": 1]))
    }

    func testSendable() {
        let value: JSONValue = ["shared": [1, 2, 3]]
        let check: @Sendable () -> Bool = { value["shared"]?[2] == 3 }
        XCTAssertTrue(check())
    }
}
