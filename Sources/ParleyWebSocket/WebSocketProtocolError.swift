/// Why a peer's bytes broke RFC 6455; each maps to the close code sent before the connection is dropped.
public enum WebSocketProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// RSV1–3 set with no extension negotiated.
    case reservedBitsSet
    /// Opcode 0x3–0x7 or 0xB–0xF.
    case reservedOpcode(UInt8)
    /// A client frame without a mask (clients must mask, section 5.1).
    case unmaskedFrame
    /// A masked frame where the decoder expects none (server-to-client direction).
    case maskedFrame
    /// A close, ping or pong frame without FIN.
    case fragmentedControlFrame
    /// A control frame with more than 125 payload bytes.
    case controlFrameTooLarge
    /// A 64-bit length with the most significant bit set.
    case invalidLength
    /// A frame whose payload is over `maxFrameSize`.
    case frameTooLarge(UInt64)
    /// A message whose reassembled payload would be over `maxMessageSize`.
    case messageTooLarge
    /// A continuation frame with no message in flight.
    case unexpectedContinuation
    /// A new text or binary frame while a fragmented message is in flight.
    case expectedContinuation
    /// Text (or a close reason) that is not valid UTF-8.
    case invalidUTF8
    /// A close frame with a one-byte payload.
    case invalidClosePayload
    /// A close code that must not appear on the wire.
    case invalidCloseCode(UInt16)

    /// The close code to send for this error.
    public var closeCode: WebSocketCloseCode {
        switch self {
        case .invalidUTF8: .invalidPayloadData
        case .frameTooLarge, .messageTooLarge: .messageTooBig
        default: .protocolError
        }
    }

    public var description: String {
        switch self {
        case .reservedBitsSet: "reserved bits set"
        case .reservedOpcode(let opcode): "reserved opcode \(opcode)"
        case .unmaskedFrame: "client frame not masked"
        case .maskedFrame: "server frame masked"
        case .fragmentedControlFrame: "fragmented control frame"
        case .controlFrameTooLarge: "control frame over 125 bytes"
        case .invalidLength: "invalid payload length"
        case .frameTooLarge(let length): "frame of \(length) bytes over the limit"
        case .messageTooLarge: "message over the limit"
        case .unexpectedContinuation: "continuation frame without a message"
        case .expectedContinuation: "new message before the previous one finished"
        case .invalidUTF8: "invalid UTF-8"
        case .invalidClosePayload: "close payload of one byte"
        case .invalidCloseCode(let code): "invalid close code \(code)"
        }
    }
}
