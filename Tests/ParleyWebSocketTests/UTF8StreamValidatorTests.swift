import XCTest
@testable import ParleyWebSocket

final class UTF8StreamValidatorTests: XCTestCase {
    private func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { UTF8StreamValidator.isValid($0) }
    }

    /// Index of the chunk at which validation fails when `bytes` is fed in `chunks`, nil if valid.
    private func failingChunk(_ chunks: [[UInt8]]) -> Int? {
        var validator = UTF8StreamValidator()
        for (i, chunk) in chunks.enumerated() where !chunk.withUnsafeBytes({ validator.validate($0) }) {
            return i
        }
        return validator.isAtCharacterBoundary ? nil : chunks.count
    }

    func testAcceptsWellFormedText() {
        for text in ["", "hello", "κόσμε", "€", "𝄞 music", "\u{10FFFF}", "\u{D7FF}\u{E000}", String(repeating: "ascii only ", count: 50)] {
            XCTAssertTrue(isValid(Array(text.utf8)), text)
        }
    }

    func testRejectsMalformedSequences() {
        let invalid: [[UInt8]] = [
            [0x80],                   // lone continuation
            [0xBF],
            [0xC0, 0x80],             // overlong NUL
            [0xC1, 0xBF],             // overlong
            [0xE0, 0x80, 0x80],       // overlong 3-byte
            [0xE0, 0x9F, 0xBF],
            [0xED, 0xA0, 0x80],       // surrogate U+D800
            [0xED, 0xBF, 0xBF],       // surrogate U+DFFF
            [0xF0, 0x80, 0x80, 0x80], // overlong 4-byte
            [0xF0, 0x8F, 0xBF, 0xBF],
            [0xF4, 0x90, 0x80, 0x80], // U+110000
            [0xF5, 0x80, 0x80, 0x80],
            [0xFE], [0xFF],
            [0xC2],                   // truncated
            [0xE2, 0x82],
            [0xF0, 0x9D, 0x84],
            [0xC2, 0x41],             // continuation missing
            [0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x80], // after the ASCII fast path
        ]
        for bytes in invalid {
            XCTAssertFalse(isValid(bytes), "\(bytes)")
        }
    }

    func testAgreesWithTheStandardLibraryOnRandomInput() {
        var random = TestRandom(seed: 1234)
        for round in 0..<20_000 {
            var bytes = random.bytes(random.below(12))
            // Bias towards multi-byte sequences, which pure noise rarely forms.
            if round % 2 == 0 {
                bytes = bytes.map { $0 % 4 == 0 ? ($0 | 0x80) & 0xBF : ($0 % 4 == 1 ? 0xE0 | ($0 & 0x0F) : $0) }
            }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            XCTAssertEqual(isValid(bytes), expected, "\(bytes)")
        }
    }

    func testCodePointSplitAcrossChunksIsAccepted() {
        let bytes = Array("a€𝄞é".utf8)
        for i in 0...bytes.count {
            for j in i...bytes.count {
                XCTAssertNil(failingChunk([Array(bytes[..<i]), Array(bytes[i..<j]), Array(bytes[j...])]), "splits \(i), \(j)")
            }
        }
    }

    func testFailsAtTheChunkHoldingTheFirstBadByte() {
        // Valid prefix, then a chunk whose first byte cannot continue the open sequence.
        XCTAssertEqual(failingChunk([Array("hello ".utf8), [0xE2, 0x82], [0x41], Array("more".utf8)]), 2)
        // A surrogate is rejected at its second byte, before the sequence completes.
        XCTAssertEqual(failingChunk([[0x41], [0xED], [0xA0], [0x80]]), 2)
        // Past U+10FFFF, also at the second byte.
        XCTAssertEqual(failingChunk([[0xF4], [0x90], [0x80, 0x80]]), 1)
        // A message ending inside a sequence is reported at the end.
        XCTAssertEqual(failingChunk([Array("ok".utf8), [0xF0, 0x9D]]), 2)
    }
}
