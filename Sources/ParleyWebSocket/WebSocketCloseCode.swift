/// A close status code (RFC 6455 section 7.4).
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16

    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: the purpose of the connection is fulfilled.
    public static let normalClosure = WebSocketCloseCode(1000)
    /// 1001: the server is shutting down or the client navigates away.
    public static let goingAway = WebSocketCloseCode(1001)
    /// 1002: the peer broke the protocol.
    public static let protocolError = WebSocketCloseCode(1002)
    /// 1003: a data type the endpoint cannot accept.
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// 1005: reported locally when a close frame carried no code; never sent.
    public static let noStatusReceived = WebSocketCloseCode(1005)
    /// 1006: reported locally when the connection dropped without a close frame; never sent.
    public static let abnormalClosure = WebSocketCloseCode(1006)
    /// 1007: a text message (or close reason) that is not valid UTF-8.
    public static let invalidPayloadData = WebSocketCloseCode(1007)
    /// 1008: a message that violates the endpoint's policy.
    public static let policyViolation = WebSocketCloseCode(1008)
    /// 1009: a frame or message over the size limit.
    public static let messageTooBig = WebSocketCloseCode(1009)
    /// 1010: the client expected an extension the server did not negotiate.
    public static let mandatoryExtension = WebSocketCloseCode(1010)
    /// 1011: the server hit an unexpected condition.
    public static let internalError = WebSocketCloseCode(1011)
    /// 1012: the service is restarting.
    public static let serviceRestart = WebSocketCloseCode(1012)
    /// 1013: try again later (overload).
    public static let tryAgainLater = WebSocketCloseCode(1013)

    /// Whether the code may appear in a close frame on the wire.
    ///
    /// 1000–1003 and 1007–1011 are RFC 6455's; 1012–1014 are IANA-registered since and sent by
    /// real servers; 3000–4999 belong to libraries and applications. Everything else — 1004,
    /// 1005, 1006, 1015, other 1xxx, 0–999, 2000–2999, 5000+ — is a protocol error.
    public var isValidOnWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    public var description: String { String(rawValue) }
}
