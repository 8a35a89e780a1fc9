/// Everything that can go wrong in ParleyKit, as one typed enum.
public enum ParleyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The session token is unknown or expired (close 4004, REST 401): log in again, then connect.
    case invalidSession
    /// The session was revoked or the user banned or deleted while connected (close 4006).
    case sessionRevoked
    /// A newer connection of this device replaced this one (close 4001); do not reconnect from here.
    case replaced
    /// The user already has the most devices the server allows (close 4005).
    case tooManyDevices
    /// The server closed for a protocol violation before the session opened (close 4002).
    case protocolViolation(String)
    /// The server refused a request; `code` is its error code (`user_not_found`, `call_ended`, …).
    case server(code: String, message: String)
    /// The request needs a connection and there is none (or it dropped before the answer).
    case notConnected
    /// No answer within the request timeout.
    case timedOut
    /// The outbox holds its maximum of messages; wait for some to be sent.
    case outboxFull
    /// A value the SDK was given is invalid (`field` says which).
    case invalidArgument(String)
    /// Local storage failed (errno from the system call).
    case storage(operation: String, errno: Int32)
    /// A REST request failed before an answer (connect, DNS, timeout).
    case http(String)
    /// The server answered something the SDK cannot read.
    case badResponse(String)
    /// A TLS connection to an `https` server failed: its certificate did not verify (chain,
    /// dates, host name) or it spoke no TLS. Never retried in clear or unverified.
    case tls(String)
    /// The client was stopped.
    case stopped

    /// Maps a close code the server sent to the error it means, nil when the client should
    /// simply reconnect (1001, 1006, 1011, 1013, 4003, …). 1015 (never sent by a peer, RFC 6455)
    /// is the transport's own: the TLS handshake was refused, `reason` says why.
    public static func forCloseCode(_ code: Int, reason: String) -> ParleyError? {
        switch code {
        case 4001: .replaced
        case 4002: .protocolViolation(reason)
        case 4004: .invalidSession
        case 4005: .tooManyDevices
        case 4006: .sessionRevoked
        case 1015: .tls(reason)
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .invalidSession: "the session token is invalid or expired"
        case .sessionRevoked: "the session was revoked"
        case .replaced: "another connection of this device replaced this one"
        case .tooManyDevices: "the user has too many devices"
        case .protocolViolation(let reason): "protocol violation: \(reason)"
        case .server(let code, let message): "\(code): \(message)"
        case .notConnected: "not connected"
        case .timedOut: "timed out"
        case .outboxFull: "the outbox is full"
        case .invalidArgument(let what): "invalid argument: \(what)"
        case .storage(let operation, let errno): "storage failed: \(operation) (errno \(errno))"
        case .http(let what): "HTTP request failed: \(what)"
        case .badResponse(let what): "bad response: \(what)"
        case .tls(let what): "TLS \(what)"
        case .stopped: "the client was stopped"
        }
    }
}
