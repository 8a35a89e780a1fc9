/// An incremental, sans-I/O frame decoder: bytes split anywhere in, frame parts out.
///
/// Each frame comes out as `.header`, then zero or more `.payload` steps as its bytes arrive
/// (already unmasked and appended to the caller's buffer, so a text message can be validated
/// while it streams in), then `.frameEnd`. Header rules are checked as soon as the first two
/// bytes are in: reserved bits, reserved opcodes, control-frame rules, masking, the frame limit.
/// The decoder holds no payload; it buffers at most a split header (14 bytes).
public struct WebSocketFrameDecoder: Sendable {
    /// One piece of decoded input.
    public enum Step: Sendable, Equatable {
        /// A frame starts; its payload follows.
        case header(WebSocketFrameHeader)
        /// This many payload bytes were unmasked and appended to the destination buffer.
        case payload(Int)
        /// The current frame's payload is complete.
        case frameEnd
    }

    /// Frames with a longer payload are rejected with `frameTooLarge` (close 1009).
    public var maxFrameSize: Int
    /// True on a server: every client frame must be masked. False on a client: none may be.
    public var expectsMaskedFrames: Bool

    private var state = State.header
    private var partialHeader: [UInt8] = []
    private var remaining = 0
    private var maskingKey: UInt32?
    private var maskPhase = 0

    private enum State: Sendable { case header, payload, frameEnd }

    public init(maxFrameSize: Int, expectsMaskedFrames: Bool = true) {
        self.maxFrameSize = maxFrameSize
        self.expectsMaskedFrames = expectsMaskedFrames
    }

    /// True between frames with no partial header buffered.
    public var isAtFrameBoundary: Bool { state == .header && partialHeader.isEmpty }

    /// Decodes the next step from `input[offset...]`, advancing `offset`; payload bytes go to
    /// the end of `destination`. Returns nil once the input is used up and more is needed.
    public mutating func next(
        _ input: UnsafeRawBufferPointer, offset: inout Int, appendingPayloadTo destination: inout [UInt8]
    ) throws(WebSocketProtocolError) -> Step? {
        switch state {
        case .frameEnd:
            state = .header
            return .frameEnd
        case .payload:
            let available = input.count - offset
            guard available > 0 else { return nil }
            let count = min(available, remaining)
            let start = destination.count
            destination.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset..<offset + count]))
            if let maskingKey {
                destination.withUnsafeMutableBytes { raw in
                    maskPhase = WebSocketMask.apply(
                        key: maskingKey, phase: maskPhase,
                        to: UnsafeMutableRawBufferPointer(rebasing: raw[start..<start + count]))
                }
            }
            offset += count
            remaining -= count
            if remaining == 0 { state = .frameEnd }
            return .payload(count)
        case .header:
            guard let header = try decodeHeader(input, offset: &offset) else { return nil }
            remaining = header.payloadLength
            maskingKey = header.maskingKey
            maskPhase = 0
            state = remaining == 0 ? .frameEnd : .payload
            return .header(header)
        }
    }

    private mutating func decodeHeader(_ input: UnsafeRawBufferPointer, offset: inout Int) throws(WebSocketProtocolError) -> WebSocketFrameHeader? {
        if partialHeader.isEmpty, input.count - offset >= 2 {
            let needed = try Self.headerSize(input[offset], input[offset + 1], maxFrameSize: maxFrameSize, masked: expectsMaskedFrames)
            if input.count - offset >= needed {
                let header = try Self.parse(UnsafeRawBufferPointer(rebasing: input[offset..<offset + needed]), maxFrameSize: maxFrameSize)
                offset += needed
                return header
            }
        }
        // Slow path: the header is split across reads; gather it byte by byte (at most 14),
        // checking the length as soon as its bytes are in.
        while offset < input.count {
            partialHeader.append(input[offset])
            offset += 1
            guard partialHeader.count >= 2 else { continue }
            let needed = try Self.headerSize(partialHeader[0], partialHeader[1], maxFrameSize: maxFrameSize, masked: expectsMaskedFrames)
            if partialHeader.count == needed {
                let header = try Self.parse(partialHeader, maxFrameSize: maxFrameSize)
                partialHeader = []
                return header
            }
            if expectsMaskedFrames && partialHeader.count == needed - 4 {
                _ = try Self.payloadLength(partialHeader, maxFrameSize: maxFrameSize)
            }
        }
        return nil
    }

    /// Checks the first two header bytes and returns the full header size.
    private static func headerSize(_ first: UInt8, _ second: UInt8, maxFrameSize: Int, masked expectsMask: Bool) throws(WebSocketProtocolError) -> Int {
        if first & 0x70 != 0 { throw .reservedBitsSet }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else { throw .reservedOpcode(first & 0x0F) }
        let fin = first & 0x80 != 0
        let masked = second & 0x80 != 0
        let length7 = Int(second & 0x7F)
        if opcode.isControl {
            if !fin { throw .fragmentedControlFrame }
            if length7 > 125 { throw .controlFrameTooLarge }
        }
        if masked != expectsMask { throw expectsMask ? .unmaskedFrame : .maskedFrame }
        if length7 < 126, length7 > maxFrameSize { throw .frameTooLarge(UInt64(length7)) }
        let extended = length7 == 126 ? 2 : (length7 == 127 ? 8 : 0)
        return 2 + extended + (masked ? 4 : 0)
    }

    /// The payload length in a header's first 2, 4 or 10 bytes, checked against the limit.
    private static func payloadLength<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, maxFrameSize: Int) throws(WebSocketProtocolError) -> Int
    where Bytes.Index == Int {
        let base = bytes.startIndex
        var length = UInt64(bytes[base + 1] & 0x7F)
        if length == 126 {
            length = UInt64(bytes[base + 2]) << 8 | UInt64(bytes[base + 3])
        } else if length == 127 {
            length = 0
            for i in 2..<10 { length = length << 8 | UInt64(bytes[base + i]) }
            if length & (1 << 63) != 0 { throw .invalidLength }
        }
        if length > UInt64(maxFrameSize) { throw .frameTooLarge(length) }
        return Int(length)
    }

    /// Parses a complete header whose first two bytes passed `headerSize`.
    private static func parse<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, maxFrameSize: Int) throws(WebSocketProtocolError) -> WebSocketFrameHeader
    where Bytes.Index == Int {
        let base = bytes.startIndex
        let first = bytes[base], second = bytes[base + 1]
        let length = try payloadLength(bytes, maxFrameSize: maxFrameSize)
        var key: UInt32?
        if second & 0x80 != 0 {
            let k = base + bytes.count - 4
            key = UInt32(bytes[k]) << 24 | UInt32(bytes[k + 1]) << 16 | UInt32(bytes[k + 2]) << 8 | UInt32(bytes[k + 3])
        }
        return WebSocketFrameHeader(fin: first & 0x80 != 0, opcode: WebSocketOpcode(rawValue: first & 0x0F)!, payloadLength: length, maskingKey: key)
    }
}
