import ParleyNet

/// Why a mail was not delivered. `isPermanent` errors (the server refused the sender, the
/// recipient or the message with a 5xx) are not retried; everything else is.
public enum SMTPError: Error, Sendable, Equatable, CustomStringConvertible {
    case unresolvedHost(String)
    case connectFailed(NetError)
    /// No reply within the command timeout, or the whole delivery took too long.
    case timedOut(String)
    /// The connection closed before the delivery finished.
    case connectionClosed
    /// A 4xx reply: try again later.
    case transient(SMTPReply)
    /// A 5xx reply: the server will not take this mail.
    case permanent(SMTPReply)
    /// A reply that breaks SMTP (no code, too long, the wrong kind for the command).
    case protocolViolation(String)
    /// Configured for STARTTLS, and the server does not offer it (never downgraded to clear text).
    case startTLSNotOffered
    /// The TLS handshake failed (STARTTLS or implicit): the server's chain or name did not
    /// verify, or it spoke no acceptable TLS. Never downgraded to clear text.
    case tls(TLSError)
    /// Credentials are configured, the connection is not encrypted, and clear-text
    /// authentication is not explicitly allowed.
    case insecureAuthenticationRefused
    /// Credentials are configured and the server offers neither AUTH PLAIN nor AUTH LOGIN.
    case authenticationNotOffered
    /// The server refused the credentials.
    case authenticationFailed(SMTPReply)

    /// Whether retrying cannot help this mail.
    public var isPermanent: Bool {
        if case .permanent = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .unresolvedHost(let host): "cannot resolve \(host)"
        case .connectFailed(let error): "connect failed: \(error)"
        case .timedOut(let what): "timed out \(what)"
        case .connectionClosed: "the server closed the connection"
        case .transient(let reply): "temporary failure: \(reply)"
        case .permanent(let reply): "refused: \(reply)"
        case .protocolViolation(let what): "SMTP protocol violation: \(what)"
        case .startTLSNotOffered: "the server does not offer STARTTLS"
        case .tls(let error): "\(error)"
        case .insecureAuthenticationRefused: "refusing to send credentials over an unencrypted connection"
        case .authenticationNotOffered: "the server offers no AUTH PLAIN or LOGIN"
        case .authenticationFailed(let reply): "authentication failed: \(reply)"
        }
    }
}
