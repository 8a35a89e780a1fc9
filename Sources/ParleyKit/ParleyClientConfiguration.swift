/// Where the server is and how the client behaves; every queue has its bound here.
public struct ParleyClientConfiguration: Sendable {
    /// The server, e.g. `http://127.0.0.1:8080` or `https://chat.example.com` (the socket is
    /// `/v1/socket` on it, over `ws`/`wss` to match).
    public var serverURL: ParleyServerURL
    /// This device's persistent id (1–128 printable ASCII, no spaces): the Parse
    /// `installationId` where the app has one, so pushes and the queue belong together.
    public var deviceId: String
    /// Reconnect delays.
    public var backoff: ReconnectBackoff
    /// Most messages waiting in the outbox (a send past it fails with `outboxFull`).
    public var maxOutboxEntries: Int
    /// Most sends awaiting the server's answer on one connection (the server allows 256
    /// pending requests of every kind).
    public var maxSendsInFlight: Int
    /// Acknowledge once this many events were processed, without waiting for `ackDelay`.
    public var ackBatchSize: Int
    /// Acknowledge processed events after at most this long (milliseconds).
    public var ackDelayMilliseconds: Int64
    /// Dedupe keys remembered (and stored with the cursor).
    public var dedupeWindow: Int
    /// Events received but not yet processed by the app before the client stops reading.
    public var maxPendingEvents: Int
    /// A request with no answer after this long counts the connection as dead (milliseconds).
    public var requestTimeoutMilliseconds: Int64
    /// Ping a server that sent nothing for this long (milliseconds).
    public var pingAfterMilliseconds: Int64
    /// Treat the connection as dead after this long without any frame or pong (milliseconds;
    /// the server's ping interval plus its pong timeout is 40 s).
    public var deadAfterMilliseconds: Int64
    /// Give up on a connect or a `welcome` after this long (milliseconds).
    public var connectTimeoutMilliseconds: Int64
    /// Wait this long before re-sending a message the server refused for now (`rate_limited`,
    /// `unavailable`), in milliseconds.
    public var sendRetryMilliseconds: Int64

    public init(serverURL: ParleyServerURL, deviceId: String, backoff: ReconnectBackoff = ReconnectBackoff(),
                maxOutboxEntries: Int = 1000, maxSendsInFlight: Int = 128, ackBatchSize: Int = 64,
                ackDelayMilliseconds: Int64 = 200, dedupeWindow: Int = 1024, maxPendingEvents: Int = 1024,
                requestTimeoutMilliseconds: Int64 = 20_000, pingAfterMilliseconds: Int64 = 25_000,
                deadAfterMilliseconds: Int64 = 45_000, connectTimeoutMilliseconds: Int64 = 15_000,
                sendRetryMilliseconds: Int64 = 1000) {
        self.serverURL = serverURL
        self.deviceId = deviceId
        self.backoff = backoff
        self.maxOutboxEntries = max(1, maxOutboxEntries)
        self.maxSendsInFlight = min(200, max(1, maxSendsInFlight))
        self.ackBatchSize = max(1, ackBatchSize)
        self.ackDelayMilliseconds = max(0, ackDelayMilliseconds)
        self.dedupeWindow = max(16, dedupeWindow)
        self.maxPendingEvents = max(16, maxPendingEvents)
        self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
        self.pingAfterMilliseconds = pingAfterMilliseconds
        self.deadAfterMilliseconds = max(pingAfterMilliseconds + 1000, deadAfterMilliseconds)
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.sendRetryMilliseconds = sendRetryMilliseconds
    }
}

/// A server's base URL split into what the transports need.
public struct ParleyServerURL: Sendable, Hashable, CustomStringConvertible {
    /// True for `https` (the socket then uses `wss`).
    public var secure: Bool
    public var host: String
    public var port: Int

    /// Parses `http://host[:port]` or `https://host[:port]` (a trailing `/` is allowed).
    public init?(_ text: String) {
        var rest = Substring(text)
        if rest.hasPrefix("http://") {
            secure = false
            rest = rest.dropFirst(7)
        } else if rest.hasPrefix("https://") {
            secure = true
            rest = rest.dropFirst(8)
        } else {
            return nil
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else { return nil }
            self.port = port
            rest = rest[..<colon]
        } else {
            port = secure ? 443 : 80
        }
        if rest.hasPrefix("["), rest.hasSuffix("]") { rest = rest.dropFirst().dropLast() }
        guard !rest.isEmpty else { return nil }
        host = String(rest)
    }

    /// `host:port` as the `Host` header wants it.
    public var authority: String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return (port == (secure ? 443 : 80)) ? bracketed : "\(bracketed):\(port)"
    }

    /// The base URL (`http://host:port`).
    public var description: String { (secure ? "https://" : "http://") + authority }

    /// The WebSocket URL of `/v1/socket`.
    public var socketURL: String { (secure ? "wss://" : "ws://") + authority + "/v1/socket" }
}
