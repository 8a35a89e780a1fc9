import ParleyNet

extension TLSError {
    /// Why the TLS connection failed, as `ParleyError.tls` words it ("certificate verification
    /// failed: certificate has expired").
    var refusalReason: String {
        switch self {
        case .configuration(let reason): "configuration: \(reason)"
        case .verificationFailed(let reason): "certificate verification failed: \(reason)"
        case .handshakeFailed(let reason): "handshake failed: \(reason)"
        case .protocolError(let reason): "protocol error: \(reason)"
        case .bufferFull: "buffer full"
        case .closed: "the server closed the connection during the handshake"
        }
    }

    /// True when trying again cannot help (an unverified certificate, a server speaking no TLS,
    /// an unreadable CA file): the socket reports close code 1015 and the client stops.
    var isRefusal: Bool {
        switch self {
        case .configuration, .verificationFailed, .handshakeFailed: true
        case .protocolError, .bufferFull, .closed: false
        }
    }
}
