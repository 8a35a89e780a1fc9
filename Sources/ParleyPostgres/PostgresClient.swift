import ParleyLog
import ParleyNet

/// The PostgreSQL client for the whole process: one `PostgresPool` per event loop.
///
/// Callable from any thread or task. Called from a task running on an event loop, it uses that
/// loop's pool with no thread hop; otherwise it picks a loop round robin and runs there (the loop
/// becomes the task executor for the call, so the body of `transaction` runs on it too).
public final class PostgresClient: Sendable {
    public let group: EventLoopGroup
    public let configuration: PostgresConfiguration
    /// One pool per loop, indexed by `EventLoop.index`.
    public let pools: [PostgresPool]

    public init(group: EventLoopGroup, configuration: PostgresConfiguration, logger: Logger = Logger(label: "postgres")) {
        self.group = group
        self.configuration = configuration
        pools = group.loops.map { PostgresPool(loop: $0, configuration: configuration, logger: logger) }
        // The loops share one server: when one pool gets through again, the others need not
        // wait out their backoff.
        for pool in pools {
            pool.onReachableAgain = { [weak self, weak pool] in
                for other in self?.pools ?? [] where other !== pool {
                    other.loop.execute { other.reconnectNow() }
                }
            }
        }
    }

    /// Starts connecting every pool (any thread, returns at once). Use `waitUntilReady` to wait.
    public func start() {
        for pool in pools {
            pool.loop.execute { pool.start() }
        }
    }

    /// Waits until every loop's pool can run a statement (`SELECT 1` on each), or fails with the
    /// pool's error after its `waitTimeout` (typically: PostgreSQL unreachable).
    public func waitUntilReady() async throws(PostgresError) {
        for pool in pools {
            _ = try await withTaskExecutorPreference(pool.loop) { () async throws(PostgresError) -> PostgresRows in
                try await pool.query("SELECT 1", prepared: false)
            }
        }
    }

    /// Checks that PostgreSQL answers `SELECT 1` within `timeout` (through the caller's loop's
    /// pool); fails at once while any loop's pool knows the database is unreachable (a node is
    /// ready only when every loop can reach it).
    public func ping(within timeout: Duration) async throws(PostgresError) {
        let unreachable = stats.unreachablePools
        if unreachable > 0 {
            throw .connectionUnavailable("PostgreSQL is unreachable from \(unreachable) of \(pools.count) event loops; retrying in the background")
        }
        let pool = pool()
        let result = await withTaskExecutorPreference(pool.loop) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, PostgresError>, Never>) in
                pool.probe(within: timeout) { continuation.resume(returning: $0) }
            }
        }
        try result.get()
    }

    /// The pool of the loop the caller runs on, else the next one round robin.
    public func pool() -> PostgresPool {
        if let current = EventLoop.current, current.index < pools.count, pools[current.index].loop === current {
            return pools[current.index]
        }
        return pools[group.next().index]
    }

    /// Runs one parameterised statement. `prepared` caches a server-side prepared statement per
    /// connection (keyed by SQL text and parameter types).
    @discardableResult
    public func query(_ sql: String, _ params: [PostgresData] = [], prepared: Bool = true) async throws(PostgresError) -> PostgresRows {
        try await onPoolLoop(sql, params, prepared: prepared, batchable: false)
    }

    /// Runs a read without side effects: it may share one sync (one implicit transaction, one
    /// flush) with the other reads sent on its connection in the same loop turn. If another
    /// statement of that batch fails, it is sent again alone.
    public func read(_ sql: String, _ params: [PostgresData] = []) async throws(PostgresError) -> PostgresRows {
        try await onPoolLoop(sql, params, prepared: true, batchable: true)
    }

    /// `read` without a task, for callers on an event loop thread (an inline HTTP answer): the
    /// statement goes through that loop's pool and `completion` runs on the loop, once.
    public func read(_ sql: String, _ params: [PostgresData] = [], completion: @escaping (Result<PostgresRows, PostgresError>) -> Void) {
        // Off the loops, `pool()` picks one round robin and `submit`'s precondition stops the call.
        pool().submit(sql, params, prepared: true, batchable: true, completion: completion)
    }

    /// Sends the statement through the pool of the caller's loop, or of the next loop round robin.
    private func onPoolLoop(_ sql: String, _ params: [PostgresData], prepared: Bool, batchable: Bool) async throws(PostgresError) -> PostgresRows {
        let pool = pool()
        // Already on the pool's loop (a request task, which prefers its connection's loop): the
        // pool's synchronous part runs here and the task resumes on its own preferred executor,
        // so the preference wrapper would only cost a task-local push and pop per statement.
        if let current = EventLoop.current, current === pool.loop {
            return try await pool.query(sql, params, prepared: prepared, batchable: batchable)
        }
        return try await withTaskExecutorPreference(pool.loop) { () async throws(PostgresError) -> PostgresRows in
            try await pool.query(sql, params, prepared: prepared, batchable: batchable)
        }
    }

    /// Runs `body` in a transaction on one pinned connection; see `PostgresPool.transaction`.
    public func transaction<T>(_ body: (PostgresTransaction) async throws -> T) async throws -> T {
        let pool = pool()
        return try await withTaskExecutorPreference(pool.loop) {
            try await pool.transaction(body)
        }
    }

    /// Sends a NOTIFY (`pg_notify`, so channel and payload are parameters, never SQL text).
    public func notify(channel: String, payload: String) async throws(PostgresError) {
        try await query("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    /// Live numbers summed over every loop's pool.
    public var stats: PostgresPoolStats.Snapshot {
        pools.reduce(.zero) { $0 + $1.stats.snapshot }
    }

    /// Closes every pool: waiting and in-flight statements fail with `shutdown`.
    public func shutdown() async {
        for pool in pools {
            await withTaskExecutorPreference(pool.loop) {
                pool.close()
            }
        }
    }
}
