import ParleyJSON
import XCTest

final class JSONSerializerTests: XCTestCase {
    func testScalars() {
        XCTAssertEqual(JSONValue.null.serialized(), "null")
        XCTAssertEqual(JSONValue.bool(true).serialized(), "true")
        XCTAssertEqual(JSONValue.bool(false).serialized(), "false")
        XCTAssertEqual(JSONValue.int(0).serialized(), "0")
        XCTAssertEqual(JSONValue.int(-42).serialized(), "-42")
        XCTAssertEqual(JSONValue.int(.max).serialized(), "9223372036854775807")
        XCTAssertEqual(JSONValue.int(.min).serialized(), "-9223372036854775808")
        XCTAssertEqual(JSONValue.string("").serialized(), "\"\"")
    }

    func testEveryCharacterThatNeedsAnEscapeIsEscapedAtAnyPosition() throws {
        let specials: [(Character, String)] = [
            ("\"", #"\""#), ("\\", #"\\"#), ("\n", #"\n"#), ("\t", #"\t"#), ("\u{8}", #"\b"#), ("\u{c}", #"\f"#),
            ("\r", #"\r"#), ("\u{0}", #"\u0000"#), ("\u{1}", #"\u0001"#), ("\u{1f}", #"\u001f"#),
        ]
        let filler = Array("abcdéfgh/ijk~lmnop😀qrstuvwxyz\u{7f}")
        for (special, escaped) in specials {
            for position in 0...filler.count {
                var characters = filler
                characters.insert(special, at: position)
                let expected = "\"" + String(filler[..<position]) + escaped + String(filler[position...]) + "\""
                let text = JSONValue.string(String(characters)).serialized()
                XCTAssertEqual(text, expected, "\(escaped) at \(position)")
                XCTAssertEqual(try JSONParser().parse(text), .string(String(characters)))
            }
        }
        XCTAssertEqual(JSONValue.string("plain text longer than eight bytes").serialized(), #""plain text longer than eight bytes""#)
    }

    func testDoublesPrintAsValidRoundTrippableJSON() throws {
        let cases: [(Double, String)] = [
            (0.1, "0.1"), (1e300, "1e+300"), (-0.0, "-0.0"), (0.0, "0.0"), (1.0, "1.0"), (-2.5, "-2.5"),
            (1e16, "1e+16"), (1e-5, "1e-05"), (.leastNonzeroMagnitude, "5e-324"), (.greatestFiniteMagnitude, "1.7976931348623157e+308"),
            (123_456_789.125, "123456789.125"), (9_223_372_036_854_775_808.0, "9.223372036854776e+18"),
        ]
        for (number, expected) in cases {
            let text = JSONValue.double(number).serialized()
            XCTAssertEqual(text, expected)
            let reparsed = try JSONParser().parse(text)
            XCTAssertEqual(reparsed, .double(number), text)
            XCTAssertEqual(reparsed.double?.sign, number.sign, text)
        }
    }

    func testNonFiniteDoublesBecomeNull() {
        XCTAssertEqual(JSONValue.double(.nan).serialized(), "null")
        XCTAssertEqual(JSONValue.double(.infinity).serialized(), "null")
        XCTAssertEqual(JSONValue.array([.double(-.infinity), 1]).serialized(), "[null,1]")
    }

    func testStringEscapes() {
        XCTAssertEqual(JSONValue.string("a\"b\\c/d").serialized(), #""a\"b\\c/d""#)
        XCTAssertEqual(JSONValue.string("\u{08}\u{0C}\n\r\t").serialized(), #""\b\f\n\r\t""#)
        XCTAssertEqual(JSONValue.string("\u{0}\u{1}\u{1F}\u{7F}").serialized(), "\"\\u0000\\u0001\\u001f\u{7F}\"")
        XCTAssertEqual(JSONValue.string("é€😀\u{2028}").serialized(), "\"é€😀\u{2028}\"")
    }

    func testEveryControlCharacterRoundTrips() throws {
        let text = String(decoding: (0..<0x20).map { UInt8($0) } + Array("plain".utf8), as: UTF8.self)
        let serialized = JSONValue.string(text).serialized()
        XCTAssertFalse(serialized.utf8.contains { $0 < 0x20 })
        XCTAssertEqual(try JSONParser().parse(serialized), .string(text))
    }

    func testContainersKeepOrderAndAreCompact() {
        let value: JSONValue = ["z": [1, "two", nil], "a": ["nested": true], "m": [], "e": [:]]
        XCTAssertEqual(value.serialized(), #"{"z":[1,"two",null],"a":{"nested":true},"m":[],"e":{}}"#)
        XCTAssertEqual(value.description, value.serialized())
        XCTAssertEqual(value.object?.description, value.serialized())
    }

    func testObjectKeysAreEscaped() {
        let value: JSONValue = ["a\"\n": 1]
        XCTAssertEqual(value.serialized(), #"{"a\"\n":1}"#)
    }

    func testSerializeAppendsToExistingBytes() {
        var bytes = Array("prefix:".utf8)
        JSONValue.array([1, "x"]).serialize(into: &bytes)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), #"prefix:[1,"x"]"#)
    }

    func testRoundTrips() throws {
        let documents = [
            #"{"results":[{"objectId":"a1","createdAt":"2024-01-01T00:00:00.000Z","n":-3,"f":0.5}],"count":1}"#,
            #"[null,true,false,0,-1,1.5,"","\\\"\/",[],{},[[]],{"":{"":""}}]"#,
            #"{"emoji":"😀","escaped":"\ud83d\ude00","ctl":"\u0001\u001f"}"#,
            #"[1e300,1E-300,-0,123456789012345678901234567890,9223372036854775807]"#,
        ]
        for document in documents {
            let value = try JSONParser().parse(document)
            let once = value.serialized()
            let reparsed = try JSONParser().parse(once)
            XCTAssertEqual(reparsed, value, document)
            XCTAssertEqual(reparsed.serialized(), once, "serialization is stable")
        }
    }
}
