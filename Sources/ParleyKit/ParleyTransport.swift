/// Opens the WebSocket to `/v1/socket`: the only thing a platform must provide. Everything
/// the connection decides (hello, acks, reconnects, pings, timeouts) is in the portable core.
public protocol ParleyTransport: Sendable {
    /// Opens a socket to `url` and reports what happens on it through `events`.
    func open(url: ParleyServerURL, events: ParleySocketEvents) -> any ParleySocket
}

/// One open (or opening) socket. Callable from any thread; calls after close do nothing.
public protocol ParleySocket: Sendable {
    func send(_ text: String)
    func sendPing()
    func close(code: Int, reason: String)
    /// Stop reading from the network (the app is behind on events) / read again.
    func pauseReading()
    func resumeReading()
}

/// What a socket reports, tagged with its connection id. Thread-safe and ordered: call it from
/// the transport's thread in the order things happened.
public struct ParleySocketEvents: Sendable {
    let id: Int
    let continuation: AsyncStream<SocketEvent>.Continuation

    enum SocketEvent: Sendable {
        case opened(Int)
        case text(Int, String)
        case activity(Int)
        case closed(Int, code: Int, reason: String)
    }

    /// The handshake finished.
    public func opened() { continuation.yield(.opened(id)) }
    /// A text message arrived.
    public func received(_ text: String) { continuation.yield(.text(id, text)) }
    /// A pong (or other sign of life without a message) arrived.
    public func activity() { continuation.yield(.activity(id)) }
    /// The socket closed or failed to open (1006 when no close frame came).
    public func closed(code: Int, reason: String) { continuation.yield(.closed(id, code: code, reason: reason)) }
}

/// A plain HTTP request for the REST endpoints (`/v1/messages`, `/v1/calls`, `/v1/turn`).
public struct ParleyHTTPRequest: Sendable {
    public var method: String
    /// Path and query, e.g. `/v1/messages?with=Xk9mP2qR7t&limit=50`.
    public var target: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(method: String, target: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }
}

/// A REST answer.
public struct ParleyHTTPResponse: Sendable {
    public var status: Int
    public var body: [UInt8]

    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// Sends REST requests to the server (URLSession on Apple, ParleyHTTP's client on Linux).
public protocol ParleyHTTPTransport: Sendable {
    func send(_ request: ParleyHTTPRequest, to server: ParleyServerURL) async throws(ParleyError) -> ParleyHTTPResponse
}
