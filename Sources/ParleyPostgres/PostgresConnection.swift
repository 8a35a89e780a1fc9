import CLibPQ
import ParleyLog
import ParleyNet

/// Observes a connection's life (the pool, the listener). Called on the connection's loop.
protocol PostgresConnectionDelegate: AnyObject {
    func connectionBecameReady(_ connection: PostgresConnection)
    func connectionLost(_ connection: PostgresConnection)
    /// A connect attempt failed (`lastError` says why); the connection retries after its backoff.
    func connectionAttemptFailed(_ connection: PostgresConnection)
    func connectionFinishedStatements(_ connection: PostgresConnection)
}

/// One libpq connection driven by an event loop: non-blocking connect, pipeline mode, automatic
/// reconnect with backoff.
///
/// Each statement gets its own sync, so an error fails only that statement, except batchable
/// ones (reads without side effects): those sent in the same loop turn share one sync, which
/// PostgreSQL runs as one implicit transaction with one flush. When one of them fails, the
/// server skips the rest of its batch, and those are sent again alone.
/// Everything queued in a turn goes out in one write at the end of the turn.
///
/// Thread confinement: every method runs on `loop` (checked); `@unchecked Sendable` only so a
/// reference can be handed to a task pinned to that loop. Use `PostgresClient` from anywhere else.
public final class PostgresConnection: IOHandler, @unchecked Sendable {
    /// Where the connection is in its life.
    public enum State: Sendable, Equatable {
        case idle, connecting, ready, waitingToReconnect, closed
    }

    public let loop: EventLoop
    let configuration: PostgresConfiguration
    private let logger: Logger
    let stats: PostgresPoolStats
    weak var delegate: (any PostgresConnectionDelegate)?
    /// Called on the loop for every NOTIFY on a channel this connection LISTENs to.
    var onNotification: ((PostgresNotification) -> Void)?

    private enum Phase {
        case idle
        case connecting(OpaquePointer, fd: Int32?, timer: TimerID)
        case ready(OpaquePointer, fd: Int32)
        case waitingToReconnect(TimerID)
        case closed
    }

    /// What the server still owes an answer to, in order.
    private enum Pending {
        case statement(PendingStatement)
        /// The sync that closes a batch of statements sent without their own.
        case batchSync
    }

    private final class PendingStatement {
        let completion: (Result<PostgresRows, PostgresError>) -> Void
        /// False for a batched statement: it is done at its last statement end, not at a sync.
        let ownsSync: Bool
        /// A batched statement's text and parameters, to send it again alone if its batch aborts.
        let retry: (sql: String, params: [PostgresData], prepared: Bool)?
        /// Statement ends (NULL from PQgetResult) still expected before the sync result.
        var endsRemaining: Int
        var sawResult = false
        var outcome: Result<PostgresRows, PostgresError>?
        /// The prepared statement executed, if any: its cached columns decode the result, and it
        /// is forgotten if preparing it fails or its plan went stale.
        let statement: PreparedStatementCache.Entry?

        init(endsRemaining: Int, statement: PreparedStatementCache.Entry?, ownsSync: Bool = true,
             retry: (sql: String, params: [PostgresData], prepared: Bool)? = nil,
             completion: @escaping (Result<PostgresRows, PostgresError>) -> Void) {
            self.endsRemaining = endsRemaining
            self.statement = statement
            self.ownsSync = ownsSync
            self.retry = retry
            self.completion = completion
        }

        /// A batched statement the server skipped because another of its batch failed: it is
        /// sent again alone instead of reporting that.
        var needsRetry: Bool {
            guard retry != nil, case .failure(let error)? = outcome else { return false }
            return error.sqlState == "25P02"
        }

        func record(_ result: Result<PostgresRows, PostgresError>) {
            if case .failure = outcome { return }
            outcome = result
        }
    }

    private var phase: Phase = .idle
    private var pending = FIFO<Pending>()
    private var statementsInFlight = 0
    /// Batched statements have been queued in libpq since the last sync.
    private var batchOpen = false
    /// The end-of-turn sync and write is scheduled.
    private var endOfTurnScheduled = false
    private var statements: PreparedStatementCache
    /// Names of prepared statements whose plan went stale, to close on the server before the next
    /// statement (closing them while reading results would re-enter libpq).
    private var staleStatements: [String] = []
    /// Why preparing a statement failed, by name: statements pipelined behind the failed PREPARE
    /// with the same name fail with "does not exist" (26000) and get this error instead.
    private var prepareFailures: [String: PostgresError] = [:]
    /// Reused by every statement sent (see `send`).
    private var parameterStorage = LibPQParameters()
    /// Reused by every read of results (see `readResults`).
    /// (Statements, not statement-and-result pairs: an array of class references is destroyed
    /// without the runtime's generic tuple and enum witnesses.)
    private var finishedStorage: [PendingStatement] = []
    private var writeInterest = false
    private var failedAttempts = 0
    private var hasConnectedBefore = false
    /// Increments at each successful connect; a transaction uses it to notice a reconnect.
    private(set) var session: UInt64 = 0
    /// Set by the pool while a transaction owns the connection.
    var pinned = false
    /// Why the last connect attempt failed or the connection was lost (for error messages).
    private(set) var lastError: String?

    init(loop: EventLoop, configuration: PostgresConfiguration, stats: PostgresPoolStats, logger: Logger) {
        self.loop = loop
        self.configuration = configuration
        self.stats = stats
        self.logger = logger
        self.statements = PreparedStatementCache(capacity: configuration.maxPreparedStatements)
    }

    /// Creates a connection owned by `loop`; call `connect()` on the loop to start it.
    public convenience init(loop: EventLoop, configuration: PostgresConfiguration) {
        self.init(loop: loop, configuration: configuration, stats: PostgresPoolStats(), logger: Logger(label: "postgres"))
    }

    /// The current state.
    public var state: State {
        switch phase {
        case .idle: .idle
        case .connecting: .connecting
        case .ready: .ready
        case .waitingToReconnect: .waitingToReconnect
        case .closed: .closed
        }
    }

    /// Statements sent and not yet answered.
    public var inFlight: Int { statementsInFlight }

    /// Batchable statements are waiting for this turn's sync: more can join them.
    var hasOpenBatch: Bool { batchOpen }

    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    // MARK: Statements

    /// Runs one statement. Must be called on `loop` (e.g. in `Task(executorPreference: loop)`).
    /// `prepared` caches a server-side prepared statement per SQL text and parameter types.
    public func query(_ sql: String, _ params: [PostgresData] = [], prepared: Bool = true) async throws(PostgresError) -> PostgresRows {
        loop.preconditionInEventLoop()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PostgresRows, PostgresError>, Never>) in
            send(sql, params, prepared: prepared) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Queues one statement in the pipeline, with its own sync unless `batchable`; it is written
    /// at the end of the loop turn. `completion` runs on the loop.
    func send(_ sql: String, _ params: [PostgresData], prepared: Bool, batchable: Bool = false,
              completion: @escaping (Result<PostgresRows, PostgresError>) -> Void) {
        loop.preconditionInEventLoop()
        if case .ready(let conn, _) = phase, !staleStatements.isEmpty {
            let names = staleStatements
            staleStatements.removeAll()
            for name in names where !queueDeallocate(conn, name) {
                connectionLost(LibPQ.errorMessage(conn))
                break
            }
        }
        guard case .ready(let conn, _) = phase else {
            completion(.failure(isClosed ? .shutdown : .connectionUnavailable("connection is \(state)")))
            return
        }
        // The connection's parameter storage, taken for this statement and given back after it.
        var parameters = parameterStorage
        parameterStorage = LibPQParameters()
        defer { parameterStorage = parameters }
        do throws(PostgresError) {
            try parameters.encode(params)
        } catch {
            completion(.failure(error))
            return
        }

        if !batchable && !closeBatch(conn) {
            let reason = LibPQ.errorMessage(conn)
            completion(.failure(.sendFailed(reason)))
            connectionLost(reason)
            return
        }
        var ends = 1
        var statement: PreparedStatementCache.Entry?
        var queued: Bool
        if prepared && statements.capacity > 0 {
            let key = PreparedStatementCache.Key(sql: sql, types: parameters.types)
            if let cached = statements.lookup(key) {
                // Its text was checked for NUL when it was prepared.
                statement = cached
                queued = parameters.withValues { PQsendQueryPrepared(conn, cached.cName, parameters.count, $0, nil, nil, 0) } == 1
            } else {
                do throws(PostgresError) {
                    try LibPQ.checkNoNUL(sql, "the SQL text")
                } catch {
                    completion(.failure(error))
                    return
                }
                let (entry, evicted) = statements.insert(key)
                statement = entry
                // Statements already sent under the evicted name run before the DEALLOCATE.
                queued = evicted.map { queueDeallocate(conn, $0.name) } ?? true
                queued = queued
                    && parameters.withTypes { PQsendPrepare(conn, entry.cName, sql, parameters.count, $0) } == 1
                    && parameters.withValues { PQsendQueryPrepared(conn, entry.cName, parameters.count, $0, nil, nil, 0) } == 1
                ends = 2
            }
        } else {
            do throws(PostgresError) {
                try LibPQ.checkNoNUL(sql, "the SQL text")
            } catch {
                completion(.failure(error))
                return
            }
            queued = parameters.withTypes { types in
                parameters.withValues { PQsendQueryParams(conn, sql, parameters.count, types, $0, nil, nil, 0) }
            } == 1
        }
        if queued && !batchable { queued = PQpipelineSync(conn) == 1 }
        guard queued else {
            // libpq's queue and ours may now disagree: start over on a fresh connection.
            let reason = LibPQ.errorMessage(conn)
            completion(.failure(.sendFailed(reason)))
            connectionLost(reason)
            return
        }
        if batchable { batchOpen = true }
        pending.append(.statement(PendingStatement(
            endsRemaining: ends, statement: statement, ownsSync: !batchable,
            retry: batchable ? (sql, params, prepared) : nil, completion: completion)))
        statementsInFlight += 1
        stats.inFlight.add(1, ordering: .relaxed)
        stats.statements.add(1, ordering: .relaxed)
        scheduleEndOfTurn()
    }

    /// Queues the sync that closes the open batch, if any. False when libpq refused.
    private func closeBatch(_ conn: OpaquePointer) -> Bool {
        guard batchOpen else { return true }
        batchOpen = false
        guard PQpipelineSync(conn) == 1 else { return false }
        pending.append(.batchSync)
        return true
    }

    private func scheduleEndOfTurn() {
        guard !endOfTurnScheduled else { return }
        endOfTurnScheduled = true
        loop.executeLocal(endOfTurn)
    }

    /// `endTurn` as work for the loop, made once: a closure made per turn cost an allocation and
    /// a weak reference each time.
    private lazy var endOfTurn: () -> Void = { [weak self] in self?.endTurn() }

    /// After the statements of this loop turn: closes the batch and writes everything queued.
    private func endTurn() {
        endOfTurnScheduled = false
        guard case .ready(let conn, _) = phase else { return }
        guard closeBatch(conn) else { return connectionLost(LibPQ.errorMessage(conn)) }
        flush()
    }

    /// Queues `DEALLOCATE name` plus a sync, whose outcome nobody waits for (a statement that
    /// failed to prepare does not exist: that error is ignored too). False when libpq refused.
    private func queueDeallocate(_ conn: OpaquePointer, _ name: String) -> Bool {
        guard closeBatch(conn), PQsendQueryParams(conn, "DEALLOCATE \(name)", 0, nil, nil, nil, nil, 0) == 1, PQpipelineSync(conn) == 1 else {
            return false
        }
        pending.append(.statement(PendingStatement(endsRemaining: 1, statement: nil, completion: { _ in })))
        statementsInFlight += 1
        stats.inFlight.add(1, ordering: .relaxed)
        stats.statements.add(1, ordering: .relaxed)
        return true
    }

    private func flush() {
        guard case .ready(let conn, let fd) = phase else { return }
        switch PQflush(conn) {
        case 0:
            if writeInterest {
                writeInterest = false
                loop.setInterest(fd: fd, .readable)
            }
        case 1:
            if !writeInterest {
                writeInterest = true
                loop.setInterest(fd: fd, [.readable, .writable])
            }
        default:
            connectionLost(LibPQ.errorMessage(conn))
        }
    }

    // MARK: Readiness

    public func handleReadable() {
        switch phase {
        case .connecting(let conn, _, _): pollConnect(conn)
        case .ready(let conn, _): readResults(conn)
        default: break
        }
    }

    public func handleWritable() {
        switch phase {
        case .connecting(let conn, _, _): pollConnect(conn)
        case .ready: flush()
        default: break
        }
    }

    private func readResults(_ conn: OpaquePointer) {
        guard PQconsumeInput(conn) == 1 else {
            connectionLost(LibPQ.errorMessage(conn))
            return
        }
        // The connection's list, taken for this read and given back emptied after it.
        var finished = finishedStorage
        finishedStorage = []
        defer {
            finished.removeAll(keepingCapacity: true)
            finishedStorage = finished
        }
        while PQisBusy(conn) == 0 {
            guard let pointer = PQgetResult(conn) else {
                // The end of one statement's results, or nothing more to read yet.
                guard case .statement(let head)? = pending.first, head.endsRemaining > 0, head.sawResult else { break }
                head.endsRemaining -= 1
                head.sawResult = false
                if head.endsRemaining == 0 && !head.ownsSync {
                    _ = pending.popFirst()
                    finish(head)
                    finished.append(head)
                }
                continue
            }
            if PQresultStatus(pointer) == PGRES_PIPELINE_SYNC {
                PQclear(pointer)
                if case .statement(let head)? = pending.popFirst() {
                    finish(head)
                    finished.append(head)
                }
                continue
            }
            guard case .statement(let head)? = pending.first else {
                PQclear(pointer)
                continue
            }
            head.sawResult = true
            var outcome = LibPQ.outcome(taking: pointer, knownColumns: head.statement?.columns)
            if let statement = head.statement {
                switch outcome {
                case .success(let rows):
                    // The execution's result (with a fresh PREPARE, the first result is the PREPARE's).
                    if head.endsRemaining == 1 { statement.columns = rows.columns }
                case .failure(let error):
                    if head.endsRemaining == 2 {
                        statements.remove(statement)
                        prepareFailures[statement.name] = error
                    } else if error.sqlState == "0A000" {
                        // "cached plan must not change result type" after a schema change: prepare afresh next time.
                        if statements.remove(statement) { staleStatements.append(statement.name) }
                    } else if error.sqlState == "26000", let original = prepareFailures[statement.name] {
                        outcome = .failure(original)
                    }
                }
            }
            head.record(outcome)
        }
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(conn) {
            notifications.append(PostgresNotification(
                channel: String(cString: notify.pointee.relname),
                payload: notify.pointee.extra.map { String(cString: $0) } ?? "",
                processID: notify.pointee.be_pid))
            PQfreemem(notify)
        }
        if pending.isEmpty && !prepareFailures.isEmpty { prepareFailures.removeAll() }
        for statement in finished {
            if statement.needsRetry, let retry = statement.retry {
                send(retry.sql, retry.params, prepared: retry.prepared, completion: statement.completion)
            } else if let outcome = statement.outcome {
                statement.completion(outcome)
            }
        }
        if let onNotification {
            for notification in notifications { onNotification(notification) }
        }
        guard case .ready(let current, _) = phase, current == conn else { return }
        if PQstatus(conn) == CONNECTION_BAD {
            connectionLost(LibPQ.errorMessage(conn))
            return
        }
        if writeInterest { flush() }
        if !finished.isEmpty { delegate?.connectionFinishedStatements(self) }
    }

    /// Takes a statement out of the in-flight count; its outcome is set from here on.
    private func finish(_ statement: PendingStatement) {
        statementsInFlight -= 1
        stats.inFlight.subtract(1, ordering: .relaxed)
        if statement.outcome == nil { statement.outcome = .failure(.unsupported("statement produced no result")) }
    }

    // MARK: Connecting

    /// Starts connecting (loop thread). Does nothing unless idle.
    public func connect() {
        loop.preconditionInEventLoop()
        guard case .idle = phase else { return }
        startConnecting()
    }

    private func startConnecting() {
        stats.connecting.add(1, ordering: .relaxed)
        let started = LibPQ.withConnectParameters(configuration.connectionString) { PQconnectStartParams($0, $1, 1) }
        guard let conn = started else {
            connectAttemptFailed(nil, reason: "libpq could not allocate a connection")
            return
        }
        if PQstatus(conn) == CONNECTION_BAD {
            connectAttemptFailed(conn, reason: LibPQ.errorMessage(conn))
            return
        }
        PQsetNoticeProcessor(conn, LibPQ.silentNoticeProcessor, nil)
        let timer = loop.schedule(after: configuration.connectTimeout) { [weak self] in
            guard let self, case .connecting(let current, _, _) = self.phase, current == conn else { return }
            self.connectAttemptFailed(conn, reason: "timed out after \(self.configuration.connectTimeout)")
        }
        phase = .connecting(conn, fd: nil, timer: timer)
        // Before the first PQconnectPoll, behave as if it returned PGRES_POLLING_WRITING.
        watchConnectingSocket(conn, interest: .writable)
    }

    /// Registers the socket libpq uses now. libpq may close it and open another (next address,
    /// SSL fallback) between polls, possibly under the same number, so it is re-registered each time.
    private func watchConnectingSocket(_ conn: OpaquePointer, interest: IOInterest) {
        guard case .connecting(_, let oldFD, let timer) = phase else { return }
        if let oldFD { loop.deregister(fd: oldFD) }
        phase = .connecting(conn, fd: nil, timer: timer)
        let fd = PQsocket(conn)
        guard fd >= 0 else {
            connectAttemptFailed(conn, reason: LibPQ.errorMessage(conn))
            return
        }
        do {
            try loop.register(fd: fd, interest: interest, handler: self)
        } catch {
            connectAttemptFailed(conn, reason: "cannot watch the socket: \(error)")
            return
        }
        phase = .connecting(conn, fd: fd, timer: timer)
    }

    private func pollConnect(_ conn: OpaquePointer) {
        switch PQconnectPoll(conn) {
        case PGRES_POLLING_READING: watchConnectingSocket(conn, interest: .readable)
        case PGRES_POLLING_WRITING: watchConnectingSocket(conn, interest: .writable)
        case PGRES_POLLING_OK: becomeReady(conn)
        default: connectAttemptFailed(conn, reason: LibPQ.errorMessage(conn))
        }
    }

    private func becomeReady(_ conn: OpaquePointer) {
        guard case .connecting(_, let registeredFD, let timer) = phase else { return }
        loop.cancel(timer)
        guard PQsetnonblocking(conn, 1) == 0, PQenterPipelineMode(conn) == 1 else {
            connectAttemptFailed(conn, reason: "cannot enter pipeline mode: \(LibPQ.errorMessage(conn))")
            return
        }
        let fd = PQsocket(conn)
        if registeredFD != fd {
            if let registeredFD { loop.deregister(fd: registeredFD) }
            do {
                try loop.register(fd: fd, interest: .readable, handler: self)
            } catch {
                phase = .connecting(conn, fd: nil, timer: timer)
                connectAttemptFailed(conn, reason: "cannot watch the socket: \(error)")
                return
            }
        } else {
            loop.setInterest(fd: fd, .readable)
        }
        phase = .ready(conn, fd: fd)
        writeInterest = false
        failedAttempts = 0
        session &+= 1
        stats.connecting.subtract(1, ordering: .relaxed)
        stats.open.add(1, ordering: .relaxed)
        logger.debug("connected to PostgreSQL", [("server_pid", String(PQbackendPID(conn)))])
        hasConnectedBefore = true
        // Pipelined ahead of anything the delegate sends, so every statement sees these settings.
        send(LibPQ.sessionSetupSQL(statementTimeoutMilliseconds: configuration.statementTimeoutMilliseconds), [], prepared: false) { [logger] result in
            if case .failure(let error) = result, error != .shutdown {
                logger.error("session setup failed", [("error", "\(error)")])
            }
        }
        delegate?.connectionBecameReady(self)
    }

    private func connectAttemptFailed(_ conn: OpaquePointer?, reason: String) {
        if case .connecting(_, let fd, let timer) = phase {
            if let fd { loop.deregister(fd: fd) }
            loop.cancel(timer)
        }
        if let conn { PQfinish(conn) }
        stats.connecting.subtract(1, ordering: .relaxed)
        failedAttempts += 1
        lastError = reason
        let level: LogLevel = failedAttempts == 1 || failedAttempts % 20 == 0 ? .warning : .debug
        logger.log(level, "PostgreSQL connection attempt failed", [("attempt", String(failedAttempts)), ("error", reason)])
        scheduleReconnect()
        delegate?.connectionAttemptFailed(self)
    }

    private func scheduleReconnect() {
        let base = Double(configuration.reconnectBaseDelay.nanoseconds)
        let cap = Double(configuration.reconnectMaxDelay.nanoseconds)
        let exponential = min(cap, base * Double(1 << min(failedAttempts, 20)))
        let delay = Int64(exponential / 2 + Double.random(in: 0...(exponential / 2)))
        stats.connecting.add(1, ordering: .relaxed)
        let timer = loop.schedule(after: .nanoseconds(delay)) { [weak self] in self?.reconnect() }
        phase = .waitingToReconnect(timer)
    }

    /// Starts the next connect attempt now instead of at the end of the backoff (loop thread):
    /// another connection to the same server just succeeded. Does nothing in any other state.
    func reconnectNow() {
        loop.preconditionInEventLoop()
        guard case .waitingToReconnect(let timer) = phase else { return }
        loop.cancel(timer)
        reconnect()
    }

    private func reconnect() {
        guard case .waitingToReconnect = phase else { return }
        stats.connecting.subtract(1, ordering: .relaxed)
        if hasConnectedBefore { stats.reconnects.add(1, ordering: .relaxed) }
        startConnecting()
    }

    // MARK: Loss and shutdown

    private func connectionLost(_ reason: String) {
        guard case .ready(let conn, let fd) = phase else { return }
        loop.deregister(fd: fd)
        PQfinish(conn)
        stats.open.subtract(1, ordering: .relaxed)
        lastError = reason
        logger.warning("lost the PostgreSQL connection; reconnecting", [("error", reason), ("in_flight", String(statementsInFlight))])
        let failed = takePendingStatements()
        statements.removeAll()
        staleStatements.removeAll()
        prepareFailures.removeAll()
        writeInterest = false
        scheduleReconnect()
        for statement in failed {
            if statement.endsRemaining == 0, let outcome = statement.outcome {
                statement.completion(outcome)
            } else {
                statement.completion(.failure(.connectionClosed(reason)))
            }
        }
        delegate?.connectionLost(self)
    }

    /// Closes the connection for good (loop thread); statements in flight fail with `shutdown`.
    public func close() {
        loop.preconditionInEventLoop()
        switch phase {
        case .idle, .closed:
            break
        case .connecting(let conn, let fd, let timer):
            if let fd { loop.deregister(fd: fd) }
            loop.cancel(timer)
            PQfinish(conn)
            stats.connecting.subtract(1, ordering: .relaxed)
        case .ready(let conn, let fd):
            loop.deregister(fd: fd)
            PQfinish(conn)
            stats.open.subtract(1, ordering: .relaxed)
        case .waitingToReconnect(let timer):
            loop.cancel(timer)
            stats.connecting.subtract(1, ordering: .relaxed)
        }
        phase = .closed
        let failed = takePendingStatements()
        for statement in failed { statement.completion(.failure(.shutdown)) }
    }
}

extension PostgresConnection {
    /// Empties the pipeline's bookkeeping (the connection is gone) and returns its statements.
    private func takePendingStatements() -> [PendingStatement] {
        let taken = pending.removeAll().compactMap { item -> PendingStatement? in
            if case .statement(let statement) = item { return statement }
            return nil
        }
        stats.inFlight.subtract(statementsInFlight, ordering: .relaxed)
        statementsInFlight = 0
        batchOpen = false
        return taken
    }
}

extension PostgresConnection.State: CustomStringConvertible {
    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .ready: "ready"
        case .waitingToReconnect: "waiting to reconnect"
        case .closed: "closed"
        }
    }
}
