import ParleyJSON
import XCTest

final class JSONParserTests: XCTestCase {
    private func parse(_ text: String, _ parser: JSONParser = JSONParser()) throws -> JSONValue {
        try parser.parse(text)
    }

    private func parseError(_ text: String, _ parser: JSONParser = JSONParser(), file: StaticString = #filePath, line: UInt = #line) -> JSONError? {
        do {
            let value = try parser.parse(text)
            XCTFail("accepted \(text.debugDescription) as \(value)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    private func parseError(bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> JSONError? {
        do {
            let value = try JSONParser().parse(bytes)
            XCTFail("accepted \(bytes) as \(value)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Scalars and structure

    func testScalarsAtTopLevel() throws {
        XCTAssertEqual(try parse("null"), .null)
        XCTAssertEqual(try parse("true"), .bool(true))
        XCTAssertEqual(try parse("false"), .bool(false))
        XCTAssertEqual(try parse("42"), .int(42))
        XCTAssertEqual(try parse("\"hi\""), .string("hi"))
        XCTAssertEqual(try parse(" \t\r\n 7 \n"), .int(7))
    }

    func testNestedDocument() throws {
        let value = try parse(#"{"a": [1, 2.5, "x", null, true, {"b": []}], "c": {}}"#)
        XCTAssertEqual(value, ["a": [1, 2.5, "x", nil, true, ["b": []]], "c": [:]])
        XCTAssertEqual(value["a"]?[5]?["b"], .array([]))
    }

    func testKeyOrderIsKept() throws {
        let value = try parse(#"{"z": 1, "a": 2, "m": 3, "b": 4}"#)
        XCTAssertEqual(value.object?.keys, ["z", "a", "m", "b"])
        XCTAssertEqual(value.serialized(), #"{"z":1,"a":2,"m":3,"b":4}"#)
    }

    func testKeyOrderIsKeptInLargeObjects() throws {
        let keys = (0..<100).map { "k\(99 - $0)" }
        let text = "{" + keys.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
        let object = try XCTUnwrap(try parse(text).object)
        XCTAssertEqual(object.keys, keys)
        XCTAssertEqual(object["k0"], .int(99))
        XCTAssertEqual(object["k99"], .int(0))
        XCTAssertNil(object["k100"])
    }

    func testDuplicateKeysLastValueWinsAtFirstPosition() throws {
        let value = try parse(#"{"a": 1, "b": 2, "a": 3}"#)
        XCTAssertEqual(value.object?.keys, ["a", "b"])
        XCTAssertEqual(value["a"], .int(3))

        let many = "{" + (0..<40).map { "\"k\($0 % 20)\":\($0)" }.joined(separator: ",") + "}"
        let object = try XCTUnwrap(try parse(many).object)
        XCTAssertEqual(object.count, 20)
        XCTAssertEqual(object["k0"], .int(20))
        XCTAssertEqual(object.keys.first, "k0")
    }

    func testKeysDifferingOnlyInNormalizationStayDistinct() throws {
        let value = try parse("{\"\u{E9}\": 1, \"e\u{301}\": 2}")
        XCTAssertEqual(value.object?.count, 2)
        XCTAssertEqual(value["\u{E9}"], .int(1))
        XCTAssertEqual(value["e\u{301}"], .int(2))
    }

    func testEntryPointsAgree() throws {
        let text = #"{"k": [1, "ü"]}"#
        let bytes = Array(text.utf8)
        let expected = try parse(text)
        XCTAssertEqual(try JSONParser().parse(bytes), expected)
        XCTAssertEqual(try JSONParser().parse(bytes[...]), expected)
        XCTAssertEqual(try bytes.withUnsafeBytes { try JSONParser().parse($0) }, expected)
        XCTAssertEqual(try JSONParser().parse(AnyCollection(bytes)), expected)
    }

    // MARK: - Numbers

    func testIntegersAreExact() throws {
        XCTAssertEqual(try parse("0"), .int(0))
        XCTAssertEqual(try parse("-1"), .int(-1))
        XCTAssertEqual(try parse("9223372036854775807"), .int(Int64.max))
        XCTAssertEqual(try parse("-9223372036854775808"), .int(Int64.min))
        XCTAssertEqual(try parse("9007199254740993"), .int(9_007_199_254_740_993))
    }

    func testIntegersBeyondInt64BecomeDoubles() throws {
        XCTAssertEqual(try parse("9223372036854775808"), .double(9_223_372_036_854_775_808.0))
        XCTAssertEqual(try parse("-9223372036854775809"), .double(-9_223_372_036_854_775_809.0))
        XCTAssertEqual(try parse("100000000000000000000"), .double(1e20))
        XCTAssertEqual(try parse("123456789012345678901234567890"), .double(123456789012345678901234567890.0))
    }

    func testNegativeZeroIsADouble() throws {
        let value = try parse("-0")
        XCTAssertEqual(value.double?.sign, .minus)
        XCTAssertEqual(value.double, 0)
        XCTAssertEqual(value.int, 0)
        XCTAssertEqual(try parse("-0.0").double?.sign, .minus)
        XCTAssertEqual(try parse("0.0").double?.sign, .plus)
    }

    func testDoublesRoundCorrectly() throws {
        let cases: [(String, Double)] = [
            ("0.1", 0.1), ("1.5", 1.5), ("-2.25", -2.25), ("1e2", 100), ("1E2", 100), ("1e+2", 100),
            ("1e-2", 0.01), ("0.000001", 0.000001), ("3.141592653589793", 3.141592653589793),
            ("1.7976931348623157e308", 1.7976931348623157e308), ("5e-324", .leastNonzeroMagnitude),
            ("2.2250738585072014e-308", 2.2250738585072014e-308),
            ("9007199254740993.0", 9007199254740992.0), ("0.30000000000000004", 0.30000000000000004),
            ("123456789012345678901234567890e-10", 12345678901234567890.1234567890),
            ("1e22", 1e22), ("1e23", 1e23), ("8.98846567431158e307", 8.98846567431158e307),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(try parse(text), .double(expected), text)
        }
    }

    func testUnderflowRoundsToZeroButOverflowIsAnError() throws {
        XCTAssertEqual(try parse("1e-400"), .double(0))
        XCTAssertEqual(try parse("-1e-400").double?.sign, .minus)
        guard case .numberOutOfRange(let position)? = parseError("[1E400]") else {
            return XCTFail("1E400 should be out of range")
        }
        XCTAssertEqual(position.offset, 1)
        guard case .numberOutOfRange? = parseError("-1e309") else {
            return XCTFail("-1e309 should be out of range")
        }
    }

    func testMalformedNumbers() {
        for text in ["01", "-01", "00", "1.", ".5", "+1", "-", "1e", "1e+", "1.e3", "0x10", "1_000", "- 1", "--1", "1.5.", "2.e-3"] {
            let error = parseError(text)
            switch error {
            case .invalidNumber?, .trailingData?, .unexpectedByte?, .unexpectedEnd?:
                break
            default:
                XCTFail("\(text): unexpected error \(String(describing: error))")
            }
        }
        XCTAssertEqual(parseError("01"), .invalidNumber(at: JSONPosition(offset: 0, line: 1, column: 1)))
        XCTAssertEqual(parseError("[1.]"), .invalidNumber(at: JSONPosition(offset: 1, line: 1, column: 2)))
    }

    func testNaNAndInfinityAreRejected() {
        for text in ["NaN", "nan", "Infinity", "-Infinity", "[Infinity]", "inf"] {
            XCTAssertNotNil(parseError(text), text)
        }
    }

    // MARK: - Strings

    func testEveryEscape() throws {
        let value = try parse(#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC""#)
        XCTAssertEqual(value, .string("\"\\/\u{08}\u{0C}\n\r\tAé€"))
    }

    func testEscapesMixedWithPlainRuns() throws {
        XCTAssertEqual(try parse(#""abc\ndef ghi jkl\tmno pqrs tuv""#), .string("abc\ndef ghi jkl\tmno pqrs tuv"))
        XCTAssertEqual(try parse(#"["a\"b", "plain", "\u0000"]"#), ["a\"b", "plain", "\u{0}"])
    }

    func testSurrogatePairs() throws {
        XCTAssertEqual(try parse(#""\uD834\uDD1E""#), .string("\u{1D11E}"))
        XCTAssertEqual(try parse(#""\ud83d\ude00 x""#), .string("😀 x"))
        XCTAssertEqual(try parse(#""\uDBFF\uDFFF""#), .string("\u{10FFFF}"))
    }

    func testLoneSurrogatesAreRejected() {
        let cases = [#""\uD800""#, #""\uDC00""#, #""\uD800\u0041""#, #""\uD800\n""#, #""\uDE00\uD834""#, #""\uD800x""#]
        for text in cases {
            guard case .loneSurrogate(let position)? = parseError(text) else {
                XCTFail("\(text) should be a lone surrogate")
                continue
            }
            XCTAssertEqual(position.offset, 1, text)
        }
    }

    func testInvalidEscapes() {
        XCTAssertEqual(parseError(#""\x""#), .invalidEscape(at: JSONPosition(offset: 1, line: 1, column: 2)))
        XCTAssertEqual(parseError(#""\u12G4""#), .invalidEscape(at: JSONPosition(offset: 5, line: 1, column: 6)))
        XCTAssertEqual(parseError(#""\'""#), .invalidEscape(at: JSONPosition(offset: 1, line: 1, column: 2)))
        guard case .unexpectedEnd? = parseError(#""\u12"#) else {
            return XCTFail("a cut-off \\u escape should be an unexpected end")
        }
    }

    func testControlCharactersMustBeEscaped() {
        XCTAssertEqual(parseError("\"a\tb\""), .controlCharacterInString(at: JSONPosition(offset: 2, line: 1, column: 3)))
        XCTAssertEqual(parseError("\"a\u{0}b\""), .controlCharacterInString(at: JSONPosition(offset: 2, line: 1, column: 3)))
        XCTAssertEqual(parseError("\"0123456789\n\""), .controlCharacterInString(at: JSONPosition(offset: 11, line: 1, column: 12)))
        XCTAssertEqual(try parse("\"\u{7F}\""), .string("\u{7F}"))
    }

    func testValidUTF8IsKept() throws {
        let text = "\"aé€😀 long enough to use the eight-byte scan: ünïcödé ✓\""
        XCTAssertEqual(try parse(text), .string(String(text.dropFirst().dropLast())))
    }

    func testInvalidUTF8IsRejected() {
        let cases: [(String, [UInt8])] = [
            ("overlong 2-byte", [0xC0, 0xAF]),
            ("overlong 2-byte C1", [0xC1, 0xBF]),
            ("overlong 3-byte", [0xE0, 0x80, 0xAF]),
            ("overlong 4-byte", [0xF0, 0x80, 0x80, 0xAF]),
            ("UTF-8 encoded surrogate", [0xED, 0xA0, 0x80]),
            ("UTF-8 encoded low surrogate", [0xED, 0xBF, 0xBF]),
            ("above U+10FFFF", [0xF4, 0x90, 0x80, 0x80]),
            ("F5 lead", [0xF5, 0x80, 0x80, 0x80]),
            ("FF", [0xFF]),
            ("stray continuation", [0x80]),
            ("truncated 3-byte", [0xE2, 0x82]),
            ("truncated 4-byte", [0xF0, 0x9F, 0x98]),
            ("bad continuation", [0xE2, 0x28, 0xA1]),
            ("5-byte form", [0xF8, 0x88, 0x80, 0x80, 0x80]),
        ]
        for (name, sequence) in cases {
            let bytes = Array("[\"ok".utf8) + sequence + Array("\"]".utf8)
            XCTAssertEqual(parseError(bytes: bytes), .invalidUTF8(at: JSONPosition(offset: 4, line: 1, column: 5)), name)
        }
    }

    func testBoundaryUTF8IsAccepted() throws {
        let cases: [[UInt8]] = [
            [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
            [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
        ]
        for sequence in cases {
            let value = try JSONParser().parse([0x22] + sequence + [0x22])
            XCTAssertEqual(value.string.map { Array($0.utf8) }, sequence)
        }
    }

    func testNonUTF8OutsideStringsIsRejected() {
        guard case .unexpectedByte(0xC3, _)? = parseError(bytes: [0xC3, 0xA9]) else {
            return XCTFail("a non-ASCII byte outside a string is unexpected")
        }
    }

    // MARK: - Structure errors and positions

    func testMalformedStructure() {
        let cases = [
            "", " ", "[", "]", "{", "}", "[1,]", "[,1]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}",
            "{a:1}", "{'a':1}", "['a']", "{\"a\":1 \"b\":2}", "[1]]", "{}}", "[1] x", "nul", "tru", "falsee",
            "True", "[1,,2]", "{,}", "{\"a\"}", "/* c */ 1", "1 // c", "[\"a\"\"b\"]", "\"abc", "[\"a", "\u{0C}1",
            "{\"a\":1]", "[1}", "1 2", "[\u{A0}1]",
        ]
        for text in cases {
            XCTAssertNotNil(parseError(text), text.debugDescription)
        }
    }

    func testErrorPositionsCountLinesAndColumns() {
        XCTAssertEqual(parseError("[1,\n 2,\n  x]"), .unexpectedByte(UInt8(ascii: "x"), at: JSONPosition(offset: 10, line: 3, column: 3)))
        XCTAssertEqual(parseError("{\"a\": 1,\n}"), .unexpectedByte(UInt8(ascii: "}"), at: JSONPosition(offset: 9, line: 2, column: 1)))
        XCTAssertEqual(parseError("[1, 2"), .unexpectedEnd(at: JSONPosition(offset: 5, line: 1, column: 6)))
        XCTAssertEqual(parseError(""), .unexpectedEnd(at: JSONPosition(offset: 0, line: 1, column: 1)))
        XCTAssertEqual(parseError("{} {}"), .trailingData(at: JSONPosition(offset: 3, line: 1, column: 4)))
        XCTAssertEqual(parseError("[tru]"), .unexpectedByte(UInt8(ascii: "]"), at: JSONPosition(offset: 4, line: 1, column: 5)))
        XCTAssertEqual(parseError("\"abc"), .unexpectedEnd(at: JSONPosition(offset: 4, line: 1, column: 5)))
    }

    func testFlatAndNestedObjectsParseAndFailAlike() throws {
        // Objects of scalars take a shorter path than nested ones; results and errors are the same.
        XCTAssertEqual(try parse(#" { "a" : 1 , "b":"x\ty", "c":null,"a":true } "#).object?.keys, ["a", "b", "c"])
        XCTAssertEqual(try parse(#"{"a":1,"a":2.5,"n":-0}"#), .object(JSONObject([("a", .double(2.5)), ("n", .double(-0.0))])))
        XCTAssertEqual(try parse(#"{"a":1,"b":{"c":[2]},"d":false}"#), .object(JSONObject([
            ("a", .int(1)), ("b", .object(JSONObject([("c", .array([.int(2)]))]))), ("d", .bool(false)),
        ])))
        XCTAssertEqual(parseError(#"{"a":1,"b":tru}"#), .unexpectedByte(UInt8(ascii: "}"), at: JSONPosition(offset: 14, line: 1, column: 15)))
        XCTAssertEqual(parseError(#"{"a":"\x"}"#), .invalidEscape(at: JSONPosition(offset: 6, line: 1, column: 7)))
        XCTAssertEqual(parseError(#"{"a":1 "b":2}"#), .unexpectedByte(UInt8(ascii: "\""), at: JSONPosition(offset: 7, line: 1, column: 8)))
        XCTAssertEqual(parseError(#"{"a":1,"b":[1,}"#), .unexpectedByte(UInt8(ascii: "}"), at: JSONPosition(offset: 14, line: 1, column: 15)))
        XCTAssertEqual(parseError(#"{"a":01}"#), .invalidNumber(at: JSONPosition(offset: 5, line: 1, column: 6)))
    }

    func testErrorDescriptionIsReadable() {
        let error = parseError("[1,\n x]")
        XCTAssertEqual(error?.description, "invalid JSON: unexpected character 'x' at line 2, column 2 (byte 5)")
        XCTAssertEqual(error?.position?.offset, 5)
        XCTAssertEqual(JSONError.tooLarge(size: 10, limit: 5).description, "invalid JSON: document of 10 bytes exceeds the limit of 5")
    }

    func testByteOrderMarkIsRejected() {
        XCTAssertEqual(parseError(bytes: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D]), .byteOrderMark(at: JSONPosition(offset: 0, line: 1, column: 1)))
        XCTAssertEqual(parseError("\u{FEFF}{}"), .byteOrderMark(at: JSONPosition(offset: 0, line: 1, column: 1)))
    }

    // MARK: - Limits

    func testDepthLimit() throws {
        let atLimit = String(repeating: "[", count: 128) + String(repeating: "]", count: 128)
        XCTAssertNoThrow(try parse(atLimit))
        let beyond = String(repeating: "[", count: 129) + String(repeating: "]", count: 129)
        XCTAssertEqual(parseError(beyond), .depthLimitExceeded(limit: 128, at: JSONPosition(offset: 128, line: 1, column: 129)))

        let objects = String(repeating: "{\"a\":", count: 5) + "1" + String(repeating: "}", count: 5)
        XCTAssertNoThrow(try parse(objects, JSONParser(maxDepth: 5)))
        guard case .depthLimitExceeded(limit: 4, _)? = parseError(objects, JSONParser(maxDepth: 4)) else {
            return XCTFail("5 nested objects should exceed a depth of 4")
        }
        XCTAssertEqual(try parse("1", JSONParser(maxDepth: 0)), .int(1))
        XCTAssertNotNil(parseError("[]", JSONParser(maxDepth: 0)))
        XCTAssertEqual(parseError("{\"a\":1}", JSONParser(maxDepth: 0)), .depthLimitExceeded(limit: 0, at: JSONPosition(offset: 0, line: 1, column: 1)))
        XCTAssertEqual(parseError(" {}", JSONParser(maxDepth: 0)), .depthLimitExceeded(limit: 0, at: JSONPosition(offset: 1, line: 1, column: 2)))
    }

    func testHostileNestingDoesNotOverflowTheStack() throws {
        let deep = String(repeating: "[", count: 1_000_000)
        guard case .depthLimitExceeded? = parseError(deep) else {
            return XCTFail("a million open brackets should hit the depth limit")
        }
        let unlimited = JSONParser(maxDepth: .max)
        guard case .unexpectedEnd? = parseError(deep, unlimited) else {
            return XCTFail("unclosed arrays should be an unexpected end")
        }
        let closed = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        XCTAssertNoThrow(try parse(closed, unlimited))
    }

    func testSizeLimit() throws {
        let parser = JSONParser(maxBytes: 10)
        XCTAssertEqual(try parser.parse("[1,2,3,45]"), [1, 2, 3, 45])
        XCTAssertEqual(parseError("[1,2,3,456]", parser), .tooLarge(size: 11, limit: 10))
        XCTAssertThrowsError(try parser.parse(Array("\"12345678901\"".utf8)))
        XCTAssertEqual(JSONParser().maxBytes, 16 * 1024 * 1024)
        XCTAssertEqual(JSONParser().maxDepth, 128)
    }

    func testMegabyteDocument() throws {
        var text = "{\"items\":["
        var index = 0
        while text.utf8.count < 1_048_576 {
            if index > 0 { text += "," }
            text += #"{"id":\#(index),"name":"item \#(index) \u00e9\n","score":\#(Double(index) / 7),"tags":["a","b"],"ok":true}"#
            index += 1
        }
        text += "]}"
        let value = try parse(text)
        let items = try XCTUnwrap(value["items"]?.array)
        XCTAssertEqual(items.count, index)
        XCTAssertEqual(items.last?["id"]?.int, Int64(index - 1))
        XCTAssertEqual(items[3]["name"], .string("item 3 é\n"))
        XCTAssertEqual(items[3]["score"]?.double, 3.0 / 7)
        XCTAssertEqual(try parse(value.serialized()), value)
    }
}
