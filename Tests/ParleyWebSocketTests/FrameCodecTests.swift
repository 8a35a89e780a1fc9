import XCTest
@testable import ParleyWebSocket

final class FrameCodecTests: XCTestCase {
    // MARK: Encoder

    func testEncodesRFCExamples() {
        // RFC 6455 section 5.7.
        XCTAssertEqual(WebSocketFrameEncoder.text("Hello"), [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        XCTAssertEqual(WebSocketFrameEncoder.text("Hello", maskingKey: 0x37FA_213D),
                       [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        XCTAssertEqual(WebSocketFrameEncoder.encode(opcode: .text, fin: false, payload: Array("Hel".utf8)), [0x01, 0x03, 0x48, 0x65, 0x6C])
        XCTAssertEqual(WebSocketFrameEncoder.encode(opcode: .continuation, payload: Array("lo".utf8)), [0x80, 0x02, 0x6C, 0x6F])
        let ping = WebSocketFrameEncoder.encode(opcode: .ping, payload: Array("Hello".utf8))
        XCTAssertEqual(ping, [0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        let medium = WebSocketFrameEncoder.binary([UInt8](repeating: 7, count: 256))
        XCTAssertEqual(Array(medium.prefix(4)), [0x82, 0x7E, 0x01, 0x00])
        XCTAssertEqual(medium.count, 260)
        let large = WebSocketFrameEncoder.binary([UInt8](repeating: 7, count: 65536))
        XCTAssertEqual(Array(large.prefix(10)), [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
        XCTAssertEqual(large.count, 65546)
    }

    func testLengthEncodingBoundaries() throws {
        for length in [0, 1, 125, 126, 127, 65535, 65536, 70000] {
            for key: UInt32? in [nil, 0xDEAD_BEEF] {
                var random = TestRandom(seed: UInt64(length) + 1)
                let payload = random.bytes(length)
                let frame = WebSocketFrameEncoder.binary(payload, maskingKey: key)
                XCTAssertEqual(frame.count, WebSocketFrameHeader.size(payloadLength: length, masked: key != nil) + length)
                var collector = FrameCollector(expectsMaskedFrames: key != nil)
                try collector.feed(frame)
                XCTAssertEqual(collector.frames, [DecodedFrame(opcode: .binary, payload: payload)], "length \(length)")
            }
        }
    }

    func testCloseFrameReasonIsCutOnACharacterBoundary() throws {
        let reason = String(repeating: "é", count: 100)  // 200 bytes
        let frame = WebSocketFrameEncoder.close(code: .goingAway, reason: reason)
        var collector = FrameCollector(expectsMaskedFrames: false)
        try collector.feed(frame)
        let close = try XCTUnwrap(collector.frames.first)
        XCTAssertEqual(close.closeCode, 1001)
        XCTAssertLessThanOrEqual(close.payload.count, 125)
        XCTAssertEqual(close.payload.count, 2 + 122)  // 61 two-byte characters fit in 123
        XCTAssertEqual(String(decoding: close.payload[2...], as: UTF8.self), String(repeating: "é", count: 61))
        XCTAssertEqual(WebSocketFrameEncoder.close(code: nil), [0x88, 0x00])
    }

    // MARK: Decoder, split inputs

    /// A stream mixing every frame shape: masked client frames of all length encodings,
    /// a fragmented text message with pings between its fragments, control frames, a close.
    private func clientStream() -> (bytes: [UInt8], frames: [DecodedFrame]) {
        var random = TestRandom(seed: 42)
        var frames: [DecodedFrame] = [
            DecodedFrame(opcode: .text, payload: Array("Hello, world".utf8)),
            DecodedFrame(opcode: .binary, payload: []),
            DecodedFrame(opcode: .binary, payload: random.bytes(125)),
            DecodedFrame(opcode: .binary, payload: random.bytes(126)),
            DecodedFrame(fin: false, opcode: .text, payload: Array("frag".utf8)),
            DecodedFrame(opcode: .ping, payload: Array("p1".utf8)),
            DecodedFrame(fin: false, opcode: .continuation, payload: Array("men".utf8)),
            DecodedFrame(opcode: .pong, payload: []),
            DecodedFrame(opcode: .ping, payload: random.bytes(125)),
            DecodedFrame(opcode: .continuation, payload: Array("ted €".utf8)),
            DecodedFrame(opcode: .binary, payload: random.bytes(300)),
        ]
        frames.append(DecodedFrame(opcode: .close, payload: [0x03, 0xE8] + Array("bye".utf8)))
        var bytes: [UInt8] = []
        for (i, frame) in frames.enumerated() {
            bytes += WebSocketFrameEncoder.encode(opcode: frame.opcode, fin: frame.fin, payload: frame.payload, maskingKey: UInt32(truncatingIfNeeded: random.next()) | UInt32(i))
        }
        return (bytes, frames)
    }

    func testEveryTwoWaySplitDecodesTheSameFrames() throws {
        let (bytes, frames) = clientStream()
        for split in 0...bytes.count {
            var collector = FrameCollector(expectsMaskedFrames: true)
            try collector.feed(bytes[..<split])
            try collector.feed(bytes[split...])
            XCTAssertEqual(collector.frames, frames, "split at \(split)")
            XCTAssertTrue(collector.decoder.isAtFrameBoundary)
        }
    }

    func testOneByteAtATimeDecodesTheSameFrames() throws {
        let (bytes, frames) = clientStream()
        var collector = FrameCollector(expectsMaskedFrames: true)
        for byte in bytes { try collector.feed([byte]) }
        XCTAssertEqual(collector.frames, frames)
    }

    func testEveryThreeWaySplitOfAFragmentedMessageWithPing() throws {
        let frames = [
            DecodedFrame(fin: false, opcode: .text, payload: Array("ab".utf8)),
            DecodedFrame(opcode: .ping, payload: Array("x".utf8)),
            DecodedFrame(opcode: .continuation, payload: Array("cd".utf8)),
        ]
        var bytes: [UInt8] = []
        for frame in frames { bytes += WebSocketFrameEncoder.encode(opcode: frame.opcode, fin: frame.fin, payload: frame.payload, maskingKey: 0x0102_0304) }
        for i in 0...bytes.count {
            for j in i...bytes.count {
                var collector = FrameCollector(expectsMaskedFrames: true)
                try collector.feed(bytes[..<i])
                try collector.feed(bytes[i..<j])
                try collector.feed(bytes[j...])
                XCTAssertEqual(collector.frames, frames, "splits \(i), \(j)")
            }
        }
    }

    func testLargeFrameSplitAtEveryHeaderByteAndAcrossThePayload() throws {
        var random = TestRandom(seed: 7)
        let payload = random.bytes(70_000)
        let bytes = WebSocketFrameEncoder.binary(payload, maskingKey: 0xA1B2_C3D4)
        var splits = Array(0...20) + Array(bytes.count - 9...bytes.count)
        for _ in 0..<50 { splits.append(random.below(bytes.count)) }
        for split in splits {
            var collector = FrameCollector(expectsMaskedFrames: true)
            try collector.feed(bytes[..<split])
            try collector.feed(bytes[split...])
            XCTAssertEqual(collector.frames, [DecodedFrame(opcode: .binary, payload: payload)], "split at \(split)")
        }
        // Random chunk sizes: the mask phase must carry across every chunk.
        var collector = FrameCollector(expectsMaskedFrames: true)
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, 1 + random.below(97))
            try collector.feed(bytes[offset..<offset + n])
            offset += n
        }
        XCTAssertEqual(collector.frames.first?.payload, payload)
        XCTAssertGreaterThan(collector.payloadSteps, 100, "payload is delivered as it arrives")
    }

    func testUnmaskedServerFramesSplitAtEveryHeaderByte() throws {
        var random = TestRandom(seed: 9)
        let frames = [
            DecodedFrame(opcode: .text, payload: []),
            DecodedFrame(opcode: .binary, payload: random.bytes(200)),
            DecodedFrame(opcode: .binary, payload: random.bytes(70_000)),
            DecodedFrame(opcode: .close, payload: [0x03, 0xE8]),
        ]
        let bytes = frames.flatMap { WebSocketFrameEncoder.encode(opcode: $0.opcode, payload: $0.payload) }
        for split in Array(0...220) + Array(bytes.count - 20...bytes.count) {
            var collector = FrameCollector(expectsMaskedFrames: false)
            try collector.feed(bytes[..<split])
            try collector.feed(bytes[split...])
            XCTAssertEqual(collector.frames, frames, "split at \(split)")
        }
    }

    // MARK: Decoder, errors

    private func decodeError(_ bytes: [UInt8], maxFrameSize: Int = 1 << 20, masked: Bool = true) -> WebSocketProtocolError? {
        var collector = FrameCollector(maxFrameSize: maxFrameSize, expectsMaskedFrames: masked)
        do {
            try collector.feed(bytes)
            return nil
        } catch {
            return error
        }
    }

    func testReservedBitsAreRejected() {
        for rsv: UInt8 in [0x40, 0x20, 0x10, 0x70] {
            XCTAssertEqual(decodeError([0x81 | rsv, 0x80]), .reservedBitsSet)
        }
    }

    func testReservedOpcodesAreRejected() {
        for opcode: UInt8 in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            XCTAssertEqual(decodeError([0x80 | opcode, 0x80]), .reservedOpcode(opcode))
        }
    }

    func testUnmaskedClientFrameIsRejected() {
        XCTAssertEqual(decodeError([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]), .unmaskedFrame)
        XCTAssertEqual(decodeError([0x81, 0x80, 1, 2, 3, 4], masked: false), .maskedFrame)
    }

    func testControlFrameRules() {
        XCTAssertEqual(decodeError([0x09, 0x80]), .fragmentedControlFrame)
        XCTAssertEqual(decodeError([0x08, 0x80]), .fragmentedControlFrame)
        XCTAssertEqual(decodeError([0x89, 0xFE, 0x00, 0x7E]), .controlFrameTooLarge)
        XCTAssertEqual(decodeError([0x8A, 0xFE]), .controlFrameTooLarge, "rejected from the first two bytes")
        XCTAssertNil(decodeError(WebSocketFrameEncoder.encode(opcode: .ping, payload: [UInt8](repeating: 1, count: 125), maskingKey: 9)))
    }

    func testFrameSizeLimitIsCheckedFromTheHeader() {
        XCTAssertEqual(decodeError([0x82, 0x80 | 126, 0x01, 0x01], maxFrameSize: 256), .frameTooLarge(257))
        XCTAssertEqual(decodeError([0x82, 0x80 | 100], maxFrameSize: 99), .frameTooLarge(100))
        XCTAssertEqual(decodeError([0x82, 0x80 | 127, 0, 0, 0, 1, 0, 0, 0, 0], maxFrameSize: 1 << 20), .frameTooLarge(1 << 32))
        XCTAssertEqual(decodeError([0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0]), .invalidLength)
    }
}
