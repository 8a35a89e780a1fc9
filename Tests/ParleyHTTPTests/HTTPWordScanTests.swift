import XCTest
@testable import ParleyHTTP

final class HTTPWordScanTests: XCTestCase {
    /// Each word check against its byte-by-byte definition.
    private static let checks: [(name: String, word: @Sendable (UInt64) -> Bool, byte: @Sendable (UInt8) -> Bool)] = [
        ("field value", HTTPWordScan.isFieldValue, { HTTPCharacterClass.isFieldValue($0) && $0 != .tab }),
        ("target", HTTPWordScan.isTarget, HTTPCharacterClass.isTarget),
        ("plain path", HTTPWordScan.isPlainPath, HTTPCharacterClass.isPlainPathByte),
        ("query", HTTPWordScan.isQuery, HTTPCharacterClass.isQueryByte),
        ("common name", HTTPWordScan.isNameCommon, { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2D
        }),
    ]

    private func word(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBufferPointer { HTTPWordScan.load($0, at: 0) }
    }

    func testEveryByteValueAtEveryPositionOfAGoodWord() {
        for check in Self.checks {
            let good = [UInt8]("aZ09-bYz".utf8)
            XCTAssertTrue(check.word(word(good)), check.name)
            for position in 0..<8 {
                for value in UInt8.min...UInt8.max {
                    var bytes = good
                    bytes[position] = value
                    XCTAssertEqual(check.word(word(bytes)), check.byte(value), "\(check.name): \(value) at \(position)")
                }
            }
        }
    }

    func testRandomWordsAgreeWithTheByteClasses() {
        var generator = SystemRandomNumberGenerator()
        for check in Self.checks {
            // Bytes drawn mostly from the class, so that both answers are common.
            let members = (UInt8.min...UInt8.max).filter(check.byte)
            for _ in 0..<20_000 {
                let bytes = (0..<8).map { _ in
                    Int.random(in: 0..<6, using: &generator) == 0 ? UInt8.random(in: .min ... .max, using: &generator)
                        : members.randomElement(using: &generator)!
                }
                XCTAssertEqual(check.word(word(bytes)), bytes.allSatisfy(check.byte), "\(check.name): \(bytes)")
            }
        }
    }
}
