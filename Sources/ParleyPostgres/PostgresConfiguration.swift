/// Settings of the PostgreSQL client (connections, pool, timeouts, reconnect policy).
public struct PostgresConfiguration: Sendable {
    /// libpq connection string: a URI (`postgresql://user@host/db`) or `key=value` pairs.
    public var connectionString: String
    /// Connections each event loop's pool keeps open.
    public var connectionsPerLoop: Int
    /// `statement_timeout` set on every connection; nil leaves the server default.
    public var statementTimeout: Duration?
    /// How long one connection attempt may take.
    public var connectTimeout: Duration
    /// Most statements in flight on one connection (sent and not yet answered).
    public var maxPipelineDepth: Int
    /// Most statements waiting in one loop's pool for a usable connection; more fail with `tooManyWaiters`.
    public var maxWaiters: Int
    /// How long a statement may wait for a usable connection (e.g. while PostgreSQL restarts).
    public var waitTimeout: Duration
    /// First reconnect delay; it doubles per failed attempt up to `reconnectMaxDelay` (with jitter).
    public var reconnectBaseDelay: Duration
    public var reconnectMaxDelay: Duration
    /// Server-side prepared statements cached per connection (by SQL text and parameter types);
    /// preparing one more closes the least recently used. 0 runs every statement unprepared.
    public var maxPreparedStatements: Int

    public init(
        connectionString: String,
        connectionsPerLoop: Int = 2,
        statementTimeout: Duration? = .seconds(30),
        connectTimeout: Duration = .seconds(10),
        maxPipelineDepth: Int = 1000,
        maxWaiters: Int = 10_000,
        waitTimeout: Duration = .seconds(10),
        reconnectBaseDelay: Duration = .milliseconds(50),
        reconnectMaxDelay: Duration = .seconds(5),
        maxPreparedStatements: Int = 256
    ) {
        self.connectionString = connectionString
        self.connectionsPerLoop = max(1, connectionsPerLoop)
        self.statementTimeout = statementTimeout
        self.connectTimeout = connectTimeout
        self.maxPipelineDepth = max(1, maxPipelineDepth)
        self.maxWaiters = max(0, maxWaiters)
        self.waitTimeout = waitTimeout
        self.reconnectBaseDelay = reconnectBaseDelay
        self.reconnectMaxDelay = reconnectMaxDelay
        self.maxPreparedStatements = max(0, maxPreparedStatements)
    }

    var statementTimeoutMilliseconds: Int? {
        statementTimeout.map { Int($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
