import ParleyNet

/// What an upgrade route decides for a request that asked to switch protocols.
public enum HTTPUpgradeAction {
    /// Write `response` (normally 101 Switching Protocols with the protocol's headers) and hand
    /// the connection to `handler`; bytes the client sent after the request are passed to it first.
    case accept(HTTPResponse, any ConnectionHandler)
    /// Write `response` and close the connection.
    case reject(HTTPResponse)
}

/// Decides an upgrade on the connection's event loop; it must not block.
public typealias HTTPUpgradeHandler = @Sendable (HTTPRequest, RequestContext, Connection) -> HTTPUpgradeAction
