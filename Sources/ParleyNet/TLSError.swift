/// Errors of the TLS layer, mapped to log lines and connection closes once, by the caller.
public enum TLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A certificate, key or CA file could not be loaded.
    case configuration(String)
    /// The peer's certificate chain or host name failed verification (never downgraded).
    case verificationFailed(String)
    /// The handshake failed (no shared protocol or cipher, bad record, alert from the peer).
    case handshakeFailed(String)
    /// A record could not be read or written after the handshake.
    case protocolError(String)
    /// Buffered ciphertext or plaintext passed its bound.
    case bufferFull
    /// The connection was shut down (close_notify sent or received).
    case closed

    public var description: String {
        switch self {
        case .configuration(let text): "TLS configuration: \(text)"
        case .verificationFailed(let text): "TLS certificate verification failed: \(text)"
        case .handshakeFailed(let text): "TLS handshake failed: \(text)"
        case .protocolError(let text): "TLS protocol error: \(text)"
        case .bufferFull: "TLS buffer full"
        case .closed: "TLS connection closed"
        }
    }
}
