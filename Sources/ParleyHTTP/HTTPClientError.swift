import ParleyNet

/// Why an `HTTPClient` request produced no response.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The host name did not resolve.
    case unresolvedHost(String)
    /// The TCP connection could not be made (refused, unreachable, connect timeout).
    case connectFailed(NetError)
    /// The TLS handshake failed: the certificate chain, its dates or the host name did not
    /// verify, or the server spoke no acceptable TLS (an `https` request is never sent in clear).
    case tls(TLSError)
    /// No complete response within the request's timeout (queueing, connecting and reading included).
    case timedOut
    /// The response broke HTTP/1.1 or a limit (head size, body size).
    case invalidResponse(HTTPResponseParserError)
    /// The connection closed before the response was complete.
    case connectionClosed
    /// Too many requests are already waiting for a connection to this host.
    case tooManyQueuedRequests
    /// The request is larger than the client's limit.
    case requestTooLarge
    /// The client was shut down.
    case shutDown

    public var description: String {
        switch self {
        case .unresolvedHost(let host): "cannot resolve \(host)"
        case .connectFailed(let error): "connect failed: \(error)"
        case .tls(let error): "\(error)"
        case .timedOut: "timed out"
        case .invalidResponse(let error): "invalid response: \(error)"
        case .connectionClosed: "connection closed before the response was complete"
        case .tooManyQueuedRequests: "too many queued requests"
        case .requestTooLarge: "request too large"
        case .shutDown: "client shut down"
        }
    }
}
