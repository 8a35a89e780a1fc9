import ParleyWebSocket

/// One whole frame, as the tests compare them.
struct DecodedFrame: Equatable, CustomStringConvertible {
    var fin: Bool
    var opcode: WebSocketOpcode
    var payload: [UInt8]

    init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }

    /// The close code in a close frame's payload.
    var closeCode: UInt16? {
        guard opcode == .close, payload.count >= 2 else { return nil }
        return UInt16(payload[0]) << 8 | UInt16(payload[1])
    }

    var text: String { String(decoding: payload, as: UTF8.self) }

    var description: String { "\(opcode)\(fin ? "" : "(more)") \(payload.count) bytes" }
}

/// Assembles `WebSocketFrameDecoder` steps into whole frames.
struct FrameCollector {
    var decoder: WebSocketFrameDecoder
    var frames: [DecodedFrame] = []
    private var header: WebSocketFrameHeader?
    private var payload: [UInt8] = []
    private(set) var payloadSteps = 0

    init(maxFrameSize: Int = 1 << 24, expectsMaskedFrames: Bool) {
        decoder = WebSocketFrameDecoder(maxFrameSize: maxFrameSize, expectsMaskedFrames: expectsMaskedFrames)
    }

    mutating func feed(_ bytes: [UInt8]) throws(WebSocketProtocolError) {
        var copy = bytes
        let count = copy.count
        let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 1)
        defer { pointer.deallocate() }
        copy.withUnsafeMutableBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: count) }
        try feed(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    mutating func feed(_ bytes: ArraySlice<UInt8>) throws(WebSocketProtocolError) {
        try feed(Array(bytes))
    }

    mutating func feed(_ raw: UnsafeRawBufferPointer) throws(WebSocketProtocolError) {
        var offset = 0
        while let step = try decoder.next(raw, offset: &offset, appendingPayloadTo: &payload) {
            switch step {
            case .header(let h):
                precondition(header == nil)
                header = h
            case .payload(let count):
                precondition(count > 0)
                payloadSteps += 1
            case .frameEnd:
                frames.append(DecodedFrame(fin: header!.fin, opcode: header!.opcode, payload: payload))
                header = nil
                payload = []
            }
        }
        precondition(offset == raw.count)
    }
}

/// A deterministic byte generator (xorshift), so failures reproduce.
struct TestRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed | 1 }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
