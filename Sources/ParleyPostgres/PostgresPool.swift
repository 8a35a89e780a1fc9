import ParleyLog
import ParleyNet

/// The PostgreSQL connections of one event loop. Statements go to the ready connection with
/// the fewest in flight (pipelining makes sharing a connection fine for independent statements);
/// when none can take one, they wait in a bounded queue until a connection is ready or
/// `waitTimeout` passes. Transactions pin a connection (at most `connectionsPerLoop - 1` at
/// once when there are several, so plain statements always keep one).
///
/// When a connect attempt fails while no connection is ready, the database is known to be
/// unreachable: waiting statements and every new one fail at once with `connectionUnavailable`
/// (callers answer "unavailable" instead of holding a request for `waitTimeout`), while the
/// connections keep retrying with their backoff. The first connection back ends that state.
///
/// Thread confinement: created anywhere, then used only on `loop` (checked). `@unchecked
/// Sendable` so `PostgresClient` can hold one per loop.
public final class PostgresPool: PostgresConnectionDelegate, @unchecked Sendable {
    public let loop: EventLoop
    public let configuration: PostgresConfiguration
    /// Live numbers for metrics (any thread).
    public let stats = PostgresPoolStats()
    private let logger: Logger
    /// Called on the loop when the pool leaves the unreachable state (set once, before `start`):
    /// the client tells the other loops' pools to try again now.
    var onReachableAgain: (@Sendable () -> Void)?

    private struct QueryWaiter {
        var sql: String
        var params: [PostgresData]
        var prepared: Bool
        var batchable: Bool
        var deadline: UInt64
        var completion: (Result<PostgresRows, PostgresError>) -> Void
        /// Called with the connection the statement was sent on, right after sending it.
        var sent: ((PostgresConnection) -> Void)?
    }

    private struct PinWaiter {
        var deadline: UInt64
        var completion: (Result<PostgresConnection, PostgresError>) -> Void
    }

    private var connections: [PostgresConnection] = []
    private var queryWaiters = FIFO<QueryWaiter>()
    private var pinWaiters = FIFO<PinWaiter>()
    private var expiryTimer: (id: TimerID, deadline: UInt64)?
    /// Set while the database is known to be unreachable: what every statement fails with.
    private var unreachable: PostgresError?
    private var started = false
    private var closed = false

    public init(loop: EventLoop, configuration: PostgresConfiguration, logger: Logger = Logger(label: "postgres")) {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger.with("loop", String(loop.index))
    }

    /// Opens the connections (loop thread). Returns at once; statements wait until one is ready.
    public func start() {
        loop.preconditionInEventLoop()
        guard !started, !closed else { return }
        started = true
        for _ in 0..<configuration.connectionsPerLoop {
            let connection = PostgresConnection(loop: loop, configuration: configuration, stats: stats, logger: logger)
            connection.delegate = self
            connections.append(connection)
            connection.connect()
        }
    }

    /// Closes every connection (loop thread): waiting and in-flight statements fail with `shutdown`.
    public func close() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        closed = true
        if let expiryTimer { loop.cancel(expiryTimer.id) }
        expiryTimer = nil
        for connection in connections { connection.close() }
        failAllWaiters(with: .shutdown)
    }

    // MARK: Statements

    /// Runs one statement on the least-loaded connection (loop thread). A `batchable` statement
    /// (a read without side effects) joins a connection's open batch when there is one; see
    /// `PostgresConnection`.
    public func query(_ sql: String, _ params: [PostgresData] = [], prepared: Bool = true, batchable: Bool = false) async throws(PostgresError) -> PostgresRows {
        loop.preconditionInEventLoop()
        // Unsafe rather than checked: `submit` calls its completion exactly once, and the checked
        // variant allocates a box per statement.
        let result = await withUnsafeContinuation { (continuation: UnsafeContinuation<Result<PostgresRows, PostgresError>, Never>) in
            submit(sql, params, prepared: prepared, batchable: batchable) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Sends now if a connection can take the statement, else queues it; `completion` runs on the loop.
    /// `sent` is called with the connection the statement went out on, right after it was queued
    /// there (statements it sends on that connection follow in the same write).
    func submit(_ sql: String, _ params: [PostgresData], prepared: Bool, batchable: Bool = false,
                completion: @escaping (Result<PostgresRows, PostgresError>) -> Void, sent: ((PostgresConnection) -> Void)? = nil) {
        loop.preconditionInEventLoop()
        if closed { return completion(.failure(.shutdown)) }
        if queryWaiters.isEmpty, let connection = (batchable ? openBatchConnection() : nil) ?? leastLoadedConnection() {
            connection.send(sql, params, prepared: prepared, batchable: batchable, completion: completion)
            sent?(connection)
            return
        }
        if let unreachable { return completion(.failure(unreachable)) }
        guard queryWaiters.count + pinWaiters.count < configuration.maxWaiters else {
            return completion(.failure(.tooManyWaiters(limit: configuration.maxWaiters)))
        }
        queryWaiters.append(QueryWaiter(sql: sql, params: params, prepared: prepared, batchable: batchable, deadline: deadline(), completion: completion, sent: sent))
        updateWaiting()
        armExpiryTimer()
    }

    /// Runs `SELECT 1`; fails with `connectionUnavailable` when no answer came within `timeout`
    /// (loop thread; `completion` runs once, on the loop). A readiness check that must answer quickly.
    func probe(within timeout: Duration, completion: @escaping (Result<Void, PostgresError>) -> Void) {
        loop.preconditionInEventLoop()
        final class Once {
            var completion: ((Result<Void, PostgresError>) -> Void)?
            var timer: TimerID?
        }
        let once = Once()
        once.completion = completion
        once.timer = loop.schedule(after: timeout) {
            guard let completion = once.completion else { return }
            once.completion = nil
            completion(.failure(.connectionUnavailable("PostgreSQL did not answer within \(timeout)")))
        }
        submit("SELECT 1", [], prepared: false) { [loop] result in
            guard let completion = once.completion else { return }
            once.completion = nil
            if let timer = once.timer { loop.cancel(timer) }
            completion(result.map { _ in })
        }
    }

    // MARK: Transactions

    /// Runs `body` inside BEGIN … COMMIT on one pinned connection (loop thread). Throwing from
    /// `body`, or any failed statement, rolls back; the error is rethrown. A COMMIT that the server
    /// turns into a rollback (a statement failed and the error was caught) throws SQLSTATE 25P02.
    public func transaction<T>(_ body: (PostgresTransaction) async throws -> T) async throws -> T {
        loop.preconditionInEventLoop()
        let connection = try await pin()
        defer { unpin(connection) }
        let transaction = PostgresTransaction(connection: connection)
        try await transaction.query("BEGIN", prepared: false)
        do {
            let value = try await body(transaction)
            let commit = try await transaction.query("COMMIT", prepared: false)
            transaction.end()
            if commit.commandTag == "ROLLBACK" {
                throw PostgresError.server(PostgresServerError(severity: "ERROR", sqlState: "25P02",
                    message: "the transaction was rolled back at COMMIT because a statement in it failed"))
            }
            return value
        } catch {
            let wasOpen = !transaction.hasEnded
            transaction.end()
            if wasOpen, connection.session == transaction.session, connection.state == .ready {
                _ = try? await connection.query("ROLLBACK", prepared: false)
            }
            throw error
        }
    }

    private func pin() async throws(PostgresError) -> PostgresConnection {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PostgresConnection, PostgresError>, Never>) in
            requestPin { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    private func requestPin(_ completion: @escaping (Result<PostgresConnection, PostgresError>) -> Void) {
        if closed { return completion(.failure(.shutdown)) }
        if pinWaiters.isEmpty, pinnedCount < maxPinned, let connection = leastLoadedConnection() {
            connection.pinned = true
            return completion(.success(connection))
        }
        if let unreachable { return completion(.failure(unreachable)) }
        guard queryWaiters.count + pinWaiters.count < configuration.maxWaiters else {
            return completion(.failure(.tooManyWaiters(limit: configuration.maxWaiters)))
        }
        pinWaiters.append(PinWaiter(deadline: deadline(), completion: completion))
        updateWaiting()
        armExpiryTimer()
    }

    private func unpin(_ connection: PostgresConnection) {
        connection.pinned = false
        serviceWaiters()
    }

    private var pinnedCount: Int { connections.reduce(0) { $0 + ($1.pinned ? 1 : 0) } }
    private var maxPinned: Int { max(1, configuration.connectionsPerLoop - 1) }

    // MARK: Scheduling

    private func leastLoadedConnection() -> PostgresConnection? {
        var best: PostgresConnection?
        for connection in connections where canTakeStatement(connection) {
            if best == nil || connection.inFlight < best!.inFlight { best = connection }
        }
        return best
    }

    /// A connection whose batch of this turn is still open: batched statements share one sync.
    private func openBatchConnection() -> PostgresConnection? {
        connections.first { $0.hasOpenBatch && canTakeStatement($0) }
    }

    private func canTakeStatement(_ connection: PostgresConnection) -> Bool {
        connection.state == .ready && !connection.pinned && connection.inFlight < configuration.maxPipelineDepth
    }

    private func serviceWaiters() {
        guard !closed else { return }
        while pinWaiters.first != nil, pinnedCount < maxPinned, let connection = leastLoadedConnection() {
            let waiter = pinWaiters.popFirst()!
            connection.pinned = true
            waiter.completion(.success(connection))
        }
        while queryWaiters.first != nil, let connection = leastLoadedConnection() {
            let waiter = queryWaiters.popFirst()!
            connection.send(waiter.sql, waiter.params, prepared: waiter.prepared, batchable: waiter.batchable, completion: waiter.completion)
            waiter.sent?(connection)
        }
        updateWaiting()
    }

    private func deadline() -> UInt64 {
        EventLoop.monotonicNanoseconds() + UInt64(max(0, configuration.waitTimeout.nanoseconds))
    }

    /// One timer for the earliest waiter deadline (waiters are FIFO with one timeout, so the heads expire first).
    private func armExpiryTimer() {
        let heads = [queryWaiters.first?.deadline, pinWaiters.first?.deadline].compactMap { $0 }
        guard let earliest = heads.min() else {
            if let expiryTimer { loop.cancel(expiryTimer.id) }
            expiryTimer = nil
            return
        }
        if let expiryTimer, expiryTimer.deadline <= earliest { return }
        if let expiryTimer { loop.cancel(expiryTimer.id) }
        let now = EventLoop.monotonicNanoseconds()
        let id = loop.schedule(after: .nanoseconds(Int64(earliest > now ? earliest - now : 0))) { [weak self] in
            self?.expireWaiters()
        }
        expiryTimer = (id, earliest)
    }

    private func expireWaiters() {
        expiryTimer = nil
        let now = EventLoop.monotonicNanoseconds()
        let reason = unavailableReason()
        var expiredQueries: [QueryWaiter] = []
        while let head = queryWaiters.first, head.deadline <= now { expiredQueries.append(queryWaiters.popFirst()!) }
        var expiredPins: [PinWaiter] = []
        while let head = pinWaiters.first, head.deadline <= now { expiredPins.append(pinWaiters.popFirst()!) }
        updateWaiting()
        armExpiryTimer()
        for waiter in expiredQueries { waiter.completion(.failure(.connectionUnavailable(reason))) }
        for waiter in expiredPins { waiter.completion(.failure(.connectionUnavailable(reason))) }
    }

    private func unavailableReason() -> String {
        let ready = connections.filter { $0.state == .ready }.count
        var text = "waited \(configuration.waitTimeout); \(ready) of \(connections.count) connections ready"
        if let last = connections.compactMap(\.lastError).last { text += "; last error: \(last)" }
        return text
    }

    private func updateWaiting() {
        stats.waiting.store(queryWaiters.count + pinWaiters.count, ordering: .relaxed)
    }

    // MARK: Reachability

    /// Enters the unreachable state (or updates its reason) and fails every waiter at once.
    private func markUnreachable(lastError: String?) {
        let wasReachable = unreachable == nil
        let reason = "PostgreSQL is unreachable (no connection could be opened; last error: \(lastError ?? "unknown")); retrying in the background"
        unreachable = .connectionUnavailable(reason)
        if wasReachable {
            stats.unreachable.store(1, ordering: .relaxed)
            logger.warning("PostgreSQL unreachable: statements fail at once until a connection is back", [("error", lastError ?? "unknown")])
        }
        failAllWaiters(with: unreachable!)
    }

    private func markReachable() {
        guard unreachable != nil else { return }
        unreachable = nil
        stats.unreachable.store(0, ordering: .relaxed)
        logger.notice("PostgreSQL reachable again")
        onReachableAgain?()
    }

    /// Connections waiting out their reconnect backoff try now (loop thread).
    func reconnectNow() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        for connection in connections { connection.reconnectNow() }
    }

    private func failAllWaiters(with error: PostgresError) {
        let queries = queryWaiters.removeAll()
        let pins = pinWaiters.removeAll()
        guard !queries.isEmpty || !pins.isEmpty else { return }
        updateWaiting()
        armExpiryTimer()
        for waiter in queries { waiter.completion(.failure(error)) }
        for waiter in pins { waiter.completion(.failure(error)) }
    }

    // MARK: PostgresConnectionDelegate

    func connectionBecameReady(_ connection: PostgresConnection) {
        markReachable()
        serviceWaiters()
    }

    func connectionLost(_ connection: PostgresConnection) {}

    func connectionAttemptFailed(_ connection: PostgresConnection) {
        guard !closed, !connections.contains(where: { $0.state == .ready }) else { return }
        markUnreachable(lastError: connection.lastError)
    }

    func connectionFinishedStatements(_ connection: PostgresConnection) {
        if !queryWaiters.isEmpty || !pinWaiters.isEmpty { serviceWaiters() }
    }
}
