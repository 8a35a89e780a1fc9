import ParleyJSON
import XCTest

final class JSONObjectTextTests: XCTestCase {
    /// The members of `text` as (key, compacted value) strings, or nil when the scan refuses it.
    private func members(_ text: String) -> [(String, String)]? {
        var text = text
        var found: [(String, String)] = []
        let ok = text.withUTF8 { utf8 in
            JSONObjectText.forEachMember(utf8) { key, value in
                var compact: [UInt8] = []
                JSONObjectText.appendCompact(value, to: &compact)
                found.append((String(decoding: key, as: UTF8.self), String(decoding: compact, as: UTF8.self)))
            }
        }
        return ok ? found : nil
    }

    func testMembersOfPostgresStyleTextAreCompactedOutsideStrings() throws {
        let text = #" { "a": 1, "b c": [1, 2.50, {"d": "x , y : z"}], "e\"f": {"g": [ ]} , "h": "}]\\", "i": null, "j": -1.5E+3 } "#
        let found = try XCTUnwrap(members(text))
        XCTAssertEqual(found.map(\.0), ["a", "b c", #"e\"f"#, "h", "i", "j"])
        XCTAssertEqual(found.map(\.1), ["1", #"[1,2.50,{"d":"x , y : z"}]"#, #"{"g":[]}"#, #""}]\\""#, "null", "-1.5E+3"])
        // The compacted members make a document the parser reads as the original.
        let rebuilt = "{" + found.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        XCTAssertEqual(try JSONParser().parse(rebuilt), try JSONParser().parse(text))
    }

    func testAnEmptyObjectHasNoMembers() throws {
        XCTAssertEqual(try XCTUnwrap(members("{}")).count, 0)
        XCTAssertEqual(try XCTUnwrap(members(" {  } ")).count, 0)
    }

    func testTextThatIsNotOneObjectIsRefused() {
        for text in ["", "[]", #""a""#, "1", "{", #"{"a"}"#, #"{"a":}"#, #"{"a":1,}"#, #"{"a":1 "b":2}"#, #"{"a":"x}"#,
                     #"{"a":[1,2}"#, #"{"a":{"b":1}"#, #"{"a":1}x"#, #"{"a":1}{}"#, "{\"a\":\"x\ny\"}", #"{a:1}"#] {
            XCTAssertNil(members(text), text)
        }
    }
}
