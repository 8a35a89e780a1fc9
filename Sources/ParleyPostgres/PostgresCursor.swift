import ParleyNet
import Synchronization

/// A server-side cursor over one SELECT, read a page at a time: `DECLARE … NO SCROLL CURSOR WITH
/// HOLD`, so PostgreSQL keeps the result (in memory up to `work_mem`, then in a temporary file)
/// and the client holds only the page it fetched.
///
/// The cursor lives in its connection's session but does not pin the connection: its FETCHes are
/// pipelined with the other statements of that connection (one that runs inside another
/// caller's transaction fails if that transaction has failed). A reconnect loses the cursor: the
/// next fetch fails with `connectionClosed`. `close()` ends it; a cursor released without
/// `close()` is closed by its deinit, so a reader that stops (a client gone mid-answer) frees it.
///
/// Thread confinement: `fetch` and `close` run on the connection's loop (they hop there).
public final class PostgresCursor: @unchecked Sendable {
    private let connection: PostgresConnection
    /// The connection's session when the cursor was declared.
    private let session: UInt64
    /// The cursor's name in that session.
    public let name: String
    private var closed = false
    /// Counted in the pool's `openCursors` (once declared).
    private var counted = false

    private static let counter = Atomic<UInt64>(0)

    init(connection: PostgresConnection, name: String) {
        self.connection = connection
        self.session = connection.session
        self.name = name
    }

    /// A name unique in the process (so in every session).
    static func nextName() -> String {
        "parley_cursor_\(counter.add(1, ordering: .relaxed).newValue)"
    }

    deinit {
        guard !closed else { return }
        if counted { connection.stats.cursors.subtract(1, ordering: .relaxed) }
        let connection = connection, session = session, name = name
        connection.loop.execute { Self.sendClose(connection, session: session, name: name) }
    }

    /// The next `count` rows (fewer at the end, none after it).
    public func fetch(_ count: Int) async throws(PostgresError) -> PostgresRows {
        let loop = connection.loop
        if EventLoop.current === loop { return try await fetchOnLoop(count) }
        return try await withTaskExecutorPreference(loop) { () async throws(PostgresError) -> PostgresRows in
            try await self.fetchOnLoop(count)
        }
    }

    private func fetchOnLoop(_ count: Int) async throws(PostgresError) -> PostgresRows {
        connection.loop.preconditionInEventLoop()
        guard !closed else { throw .unsupported("cursor \(name) is closed") }
        guard connection.session == session, connection.state == .ready else {
            throw .connectionClosed("the connection holding cursor \(name) was lost")
        }
        return try await connection.query("FETCH FORWARD \(max(1, count)) FROM \(name)", [], prepared: false)
    }

    /// Closes the cursor on the server (once; later calls do nothing). Returns at once.
    public func close() {
        let connection = connection, session = session, name = name
        if connection.loop.inEventLoop {
            guard !closed else { return }
            closed = true
            if counted { connection.stats.cursors.subtract(1, ordering: .relaxed) }
            Self.sendClose(connection, session: session, name: name)
        } else {
            connection.loop.execute { self.close() }
        }
    }

    /// Queues `CLOSE name` when the session that declared it is still the connection's.
    private static func sendClose(_ connection: PostgresConnection, session: UInt64, name: String) {
        guard connection.session == session, connection.state == .ready else { return }
        connection.send("CLOSE \(name)", [], prepared: false) { _ in }
    }
}

extension PostgresPool {
    /// Declares a cursor over `sql` on the least-loaded connection (loop thread) and fetches its
    /// first `count` rows in the same write; see `PostgresCursor`.
    public func cursor(_ sql: String, _ params: [PostgresData] = [], first count: Int) async throws(PostgresError) -> (PostgresCursor, PostgresRows) {
        loop.preconditionInEventLoop()
        final class Outcome {
            var cursor: PostgresCursor?
            var declared: Result<PostgresRows, PostgresError>?
        }
        let name = PostgresCursor.nextName()
        let outcome = Outcome()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PostgresRows, PostgresError>, Never>) in
            submit("DECLARE \(name) NO SCROLL CURSOR WITH HOLD FOR \(sql)", params, prepared: false, completion: { result in
                outcome.declared = result
                // Sent nowhere (the pool refused it): the FETCH was never queued.
                if outcome.cursor == nil, case .failure(let error) = result { continuation.resume(returning: .failure(error)) }
            }, sent: { connection in
                // The connection refused the DECLARE at once (and its completion answered).
                if case .failure? = outcome.declared { return }
                outcome.cursor = PostgresCursor(connection: connection, name: name)
                connection.send("FETCH FORWARD \(max(1, count)) FROM \(name)", [], prepared: false) { fetched in
                    // A failed DECLARE fails its FETCH too ("cursor does not exist"): report the DECLARE's error.
                    if case .failure(let error)? = outcome.declared {
                        continuation.resume(returning: .failure(error))
                    } else {
                        continuation.resume(returning: fetched)
                    }
                }
            })
        }
        guard let cursor = outcome.cursor else {
            if case .failure(let error) = result { throw error }
            throw PostgresError.unsupported("cursor \(name) was not declared")
        }
        switch result {
        case .success(let rows):
            cursor.markCounted()
            stats.cursors.add(1, ordering: .relaxed)
            return (cursor, rows)
        case .failure(let error):
            if case .success? = outcome.declared { cursor.close() } else { cursor.markClosed() }
            throw error
        }
    }
}

extension PostgresCursor {
    /// The cursor was never declared: nothing to close.
    fileprivate func markClosed() {
        closed = true
    }

    fileprivate func markCounted() {
        counted = true
    }
}

extension PostgresClient {
    /// Declares a cursor over `sql` and fetches its first `count` rows, through the pool of the
    /// caller's loop (or the next one round robin); see `PostgresCursor`.
    public func cursor(_ sql: String, _ params: [PostgresData] = [], first count: Int) async throws(PostgresError) -> (PostgresCursor, PostgresRows) {
        let pool = pool()
        if let current = EventLoop.current, current === pool.loop {
            return try await pool.cursor(sql, params, first: count)
        }
        return try await withTaskExecutorPreference(pool.loop) { () async throws(PostgresError) -> (PostgresCursor, PostgresRows) in
            try await pool.cursor(sql, params, first: count)
        }
    }
}
