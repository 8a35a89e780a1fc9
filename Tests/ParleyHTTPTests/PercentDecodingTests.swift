import XCTest
@testable import ParleyHTTP

final class PercentDecodingTests: XCTestCase {
    private func decodeQuery(_ text: String) -> String {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { PercentDecoding.decodeQueryComponent($0) }
    }

    /// The definition: `+` is a space, `%` and two hex digits a byte, anything else as written,
    /// then UTF-8 decoding with U+FFFD for invalid sequences.
    private func reference(_ bytes: [UInt8]) -> String {
        var decoded: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == .percent, index + 2 < bytes.count,
               let high = HTTPCharacterClass.hexValue(bytes[index + 1]), let low = HTTPCharacterClass.hexValue(bytes[index + 2]) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index] == .plus ? .space : bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    func testQueryComponents() {
        XCTAssertEqual(decodeQuery(""), "")
        XCTAssertEqual(decodeQuery("plain"), "plain")
        XCTAssertEqual(decodeQuery("a+b"), "a b")
        XCTAssertEqual(decodeQuery("+"), " ")
        XCTAssertEqual(decodeQuery("caf%C3%A9+au+lait"), "café au lait")
        XCTAssertEqual(decodeQuery("%7B%22username%22%3A%2212345%22%7D"), #"{"username":"12345"}"#)
        XCTAssertEqual(decodeQuery("a%2Bb%2bc"), "a+b+c")
        // Malformed escapes stay as written, at the end too.
        XCTAssertEqual(decodeQuery("%zz%"), "%zz%")
        XCTAssertEqual(decodeQuery("x%4"), "x%4")
        XCTAssertEqual(decodeQuery("x%41"), "xA")
        XCTAssertEqual(decodeQuery("%g1%1g"), "%g1%1g")
        // Invalid UTF-8 becomes U+FFFD; a NUL is kept.
        XCTAssertEqual(decodeQuery("a%FFb"), "a\u{FFFD}b")
        XCTAssertEqual(decodeQuery("%C3"), "\u{FFFD}")
        XCTAssertEqual(decodeQuery("%00"), "\u{0}")
        let long = String(repeating: "abcdefgh", count: 8) + "%20" + String(repeating: "%C3%A9", count: 20)
        XCTAssertEqual(decodeQuery(long), String(repeating: "abcdefgh", count: 8) + " " + String(repeating: "é", count: 20))
    }

    func testRandomQueryComponentsMatchTheDefinition() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("%+aF9zé ".utf8) + [0xFF, 0xC3, 0xA9]
        for _ in 0..<5_000 {
            let count = Int.random(in: 0..<40, using: &generator)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &generator)! }
            let decoded = bytes.withUnsafeBufferPointer { PercentDecoding.decodeQueryComponent($0) }
            XCTAssertEqual(decoded, reference(bytes), "\(bytes)")
        }
    }
}
