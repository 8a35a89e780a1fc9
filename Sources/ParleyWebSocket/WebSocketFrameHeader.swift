/// The fixed part of a frame: flags, opcode, payload length and masking key.
public struct WebSocketFrameHeader: Sendable, Equatable {
    /// Last frame of a message.
    public var fin: Bool
    public var opcode: WebSocketOpcode
    /// Payload bytes that follow the header.
    public var payloadLength: Int
    /// The four masking-key bytes in wire order, packed big-endian; nil for an unmasked frame.
    public var maskingKey: UInt32?

    public init(fin: Bool, opcode: WebSocketOpcode, payloadLength: Int, maskingKey: UInt32? = nil) {
        self.fin = fin
        self.opcode = opcode
        self.payloadLength = payloadLength
        self.maskingKey = maskingKey
    }

    /// Header bytes for a payload of `payloadLength` bytes (2, 4 or 10, plus 4 with a mask).
    @inlinable
    public static func size(payloadLength: Int, masked: Bool) -> Int {
        let base = payloadLength < 126 ? 2 : (payloadLength <= 0xFFFF ? 4 : 10)
        return masked ? base + 4 : base
    }
}
