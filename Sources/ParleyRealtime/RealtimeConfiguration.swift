/// Whose presence and typing a user gets.
public enum PresenceScope: String, Sendable, CaseIterable {
    /// Only of the users who reached the user (sent them a message or called them).
    case contacts
    /// Of any user.
    case everyone
}

/// Limits and timers of the realtime service; defaults match `parley serve`'s options.
public struct RealtimeConfiguration: Sendable {
    /// A connection must send `hello` within this time.
    public var helloTimeout: Duration = .seconds(10)
    /// Ping a silent peer after this long (nil: never).
    public var pingInterval: Duration? = .seconds(30)
    /// Drop a pinged peer that sends nothing back within this time.
    public var pongTimeout: Duration = .seconds(10)
    /// Largest incoming WebSocket message (1009 above it).
    public var maxFrameBytes = 128 * 1024
    /// Hard bound on bytes queued for one peer (the peer is dropped past it).
    public var maxOutboundBytes = 1 << 20
    /// Past this many queued bytes, live events stop and are read from the queue once the peer catches up.
    public var outboundHighWater = 256 * 1024
    /// Recipients per message.
    public var maxRecipients = 100
    /// Bytes of `text` (UTF-8).
    public var maxTextBytes = 64 * 1024
    /// Bytes of `headers` (as compact JSON).
    public var maxHeaderBytes = 1024
    /// Bytes of `clientMessageId`.
    public var maxClientMessageIDBytes = 128
    /// Devices per user (a new device past it is refused).
    public var maxDevicesPerUser = 20
    /// Presence subscriptions per connection.
    public var maxSubscriptions = 500
    /// Requests of one connection waiting for an answer (and frames held before `welcome`).
    public var maxPendingRequests = 256
    /// Messages (plus `message.read` ids) a user may send per second, sustained.
    public var sendRatePerSecond = 100.0
    /// Burst allowance of the per-user rate limit.
    public var sendBurst = 200.0
    /// Events read from the database per replay page.
    public var replayPageSize = 500
    /// Messages committed in one group commit at most.
    public var maxBatchSize = 512
    /// Group commits of sends in flight per event loop (more sends wait for the next batch). With
    /// 1, the messages a connection sends are committed, and so numbered at every device, in the
    /// order it sent them; batches of one loop would mostly wait for each other's device locks anyway.
    public var maxBatchesInFlightPerLoop = 1
    /// Acknowledgements are collected this long before they are committed together (they only
    /// delay `delivered` receipts).
    public var ackDelay: Duration = .milliseconds(10)
    /// Queued events older than this are removed (the device's `welcome` then says `gap`), and
    /// devices unused for this long are forgotten.
    public var retention: Duration = .seconds(30 * 86_400)
    /// How often the retention job runs.
    public var retentionInterval: Duration = .seconds(3600)
    /// How often this node records its heartbeat (multi-node routing).
    public var heartbeatInterval: Duration = .seconds(10)
    /// A node silent for this long is considered dead; its devices count as offline.
    public var nodeStaleAfter: Duration = .seconds(45)
    /// Typing events relayed per connection per second.
    public var typingRatePerSecond = 5.0
    /// Whose presence a user may subscribe to and whose typing reaches them.
    public var presenceScope = PresenceScope.contacts

    public init() {}
}
