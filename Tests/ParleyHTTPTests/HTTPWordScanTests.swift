import XCTest
@testable import ParleyHTTP

final class HTTPWordScanTests: XCTestCase {
    /// Each word check against its byte-by-byte definition.
    private static let checks: [(name: String, stops: @Sendable (UInt64) -> UInt64, byte: @Sendable (UInt8) -> Bool)] = [
        ("field value", HTTPWordScan.fieldValueStops, { HTTPCharacterClass.isFieldValue($0) && $0 != .tab }),
        ("target", HTTPWordScan.targetStops, HTTPCharacterClass.isTarget),
        ("plain path", HTTPWordScan.plainPathStops, HTTPCharacterClass.isPlainPathByte),
        ("query", HTTPWordScan.queryStops, HTTPCharacterClass.isQueryByte),
        ("common name", HTTPWordScan.nameCommonStops, { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2D
        }),
    ]

    private func word(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBufferPointer { HTTPWordScan.load($0, at: 0) }
    }

    /// How many bytes from the first are in the class.
    private func expectedRun(_ bytes: [UInt8], _ isMember: (UInt8) -> Bool) -> Int {
        bytes.firstIndex { !isMember($0) } ?? 8
    }

    func testEveryByteValueAtEveryPositionOfAGoodWord() {
        for check in Self.checks {
            let good = [UInt8]("aZ09-bYz".utf8)
            XCTAssertEqual(check.stops(word(good)), 0, check.name)
            XCTAssertEqual(HTTPWordScan.run(check.stops(word(good))), 8, check.name)
            for position in 0..<8 {
                for value in UInt8.min...UInt8.max {
                    var bytes = good
                    bytes[position] = value
                    let stops = check.stops(word(bytes))
                    XCTAssertEqual(stops == 0, check.byte(value), "\(check.name): \(value) at \(position)")
                    XCTAssertEqual(HTTPWordScan.run(stops), check.byte(value) ? 8 : position, "\(check.name): \(value) at \(position)")
                }
            }
        }
    }

    func testRandomWordsAgreeWithTheByteClasses() {
        var generator = SystemRandomNumberGenerator()
        for check in Self.checks {
            // Bytes drawn mostly from the class, so that both answers are common, and stops are
            // often followed by bytes that would make borrows or carries.
            let members = (UInt8.min...UInt8.max).filter(check.byte)
            for _ in 0..<20_000 {
                let bytes = (0..<8).map { _ in
                    Int.random(in: 0..<6, using: &generator) == 0 ? UInt8.random(in: .min ... .max, using: &generator)
                        : members.randomElement(using: &generator)!
                }
                let stops = check.stops(word(bytes))
                XCTAssertEqual(stops == 0, bytes.allSatisfy(check.byte), "\(check.name): \(bytes)")
                XCTAssertEqual(HTTPWordScan.run(stops), expectedRun(bytes, check.byte), "\(check.name): \(bytes)")
            }
        }
    }

    func testStopsAfterTheFirstDoNotMatter() {
        // Two stops in one word: the run ends at the first, whatever the bytes after it.
        for check in Self.checks {
            let nonMembers = (UInt8.min...UInt8.max).filter { !check.byte($0) }
            for first in 0..<8 {
                for value in nonMembers {
                    var bytes = [UInt8]("aZ09-bYz".utf8)
                    bytes[first] = value
                    for later in (first + 1)..<8 { bytes[later] = nonMembers[(Int(value) + later) % nonMembers.count] }
                    XCTAssertEqual(HTTPWordScan.run(check.stops(word(bytes))), first, "\(check.name): \(bytes)")
                }
            }
        }
    }
}
