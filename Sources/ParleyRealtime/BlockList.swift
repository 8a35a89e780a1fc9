import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// Per-user block lists (`rt_blocks`): a user's blockers get none of the user's messages, call
/// invites, presence or typing. Who blocked a user is cached per node (bounded) and dropped when
/// a change is announced (`NOTIFY parley_blocks`, payload the blocked user); while this node's
/// LISTEN connection is down nothing is cached, so every check reads the table.
public final class BlockList: Sendable {
    /// The PostgreSQL channel of block changes.
    public static let channel = "parley_blocks"
    /// Most users one user may block.
    public static let maxBlocksPerUser = 1000

    /// One entry of a user's list.
    public struct Entry: Sendable, Equatable {
        public var userId: String
        /// Unix milliseconds.
        public var blockedAt: Int64
    }

    private struct State {
        /// Blocked user → the users who blocked them.
        var blockers: [String: Set<String>] = [:]
        var generation = 0
        var listening = false
    }

    let database: PostgresClient
    /// Users whose blockers are cached at most (the cache starts over past it).
    let capacity: Int
    private let state = Mutex(State())
    private let listener = Mutex<PostgresListener?>(nil)

    init(database: PostgresClient, capacity: Int = 100_000) {
        self.database = database
        self.capacity = capacity
    }

    /// The users who blocked `user`, when this node knows them without a read.
    public func cachedBlockers(of user: String) -> Set<String>? {
        state.withLock { $0.listening ? $0.blockers[user] : nil }
    }

    /// The users who blocked `user` (from memory when cached).
    public func blockers(of user: String) async throws(RealtimeFailure) -> Set<String> {
        if let cached = cachedBlockers(of: user) { return cached }
        return try await blockers(of: [user])[user] ?? []
    }

    /// The blockers of each of `users`, read in one statement for those not cached.
    public func blockers(of users: [String]) async throws(RealtimeFailure) -> [String: Set<String>] {
        var found: [String: Set<String>] = [:]
        var missing: [String] = []
        let generation = state.withLock { state -> Int in
            for user in Set(users) {
                if state.listening, let cached = state.blockers[user] { found[user] = cached } else { missing.append(user) }
            }
            return state.generation
        }
        guard !missing.isEmpty else { return found }
        let rows: PostgresRows
        do {
            rows = try await database.query("SELECT blocked, blocker FROM rt_blocks WHERE blocked = ANY ($1::text[])",
                                            [.text(SQLArray.literal(missing))])
        } catch {
            throw RealtimeFailure.database(error)
        }
        var loaded = Dictionary(uniqueKeysWithValues: missing.map { ($0, Set<String>()) })
        for row in rows {
            guard let blocked = row["blocked"].string, let blocker = row["blocker"].string else { continue }
            loaded[blocked, default: []].insert(blocker)
        }
        state.withLock { state in
            guard state.listening, state.generation == generation else { return }
            if state.blockers.count + loaded.count > capacity { state.blockers.removeAll(keepingCapacity: true) }
            state.blockers.merge(loaded) { $1 }
        }
        found.merge(loaded) { $1 }
        return found
    }

    /// `blocker`'s list, newest first.
    public func list(of blocker: String) async throws(RealtimeFailure) -> [Entry] {
        let rows: PostgresRows
        do {
            rows = try await database.query("SELECT blocked, created_at FROM rt_blocks WHERE blocker = $1 ORDER BY created_at DESC, blocked LIMIT $2",
                                            [.text(blocker), .int(Self.maxBlocksPerUser)])
        } catch {
            throw RealtimeFailure.database(error)
        }
        return rows.compactMap { row in
            guard let user = row["blocked"].string else { return nil }
            return Entry(userId: user, blockedAt: row["created_at"].timestampMilliseconds ?? 0)
        }
    }

    /// `blocker` blocks `user` (again: no change). Refuses the blocker itself (`bad_request`), a
    /// user that does not exist (`user_not_found`) and a full list (`too_many_blocks`).
    public func block(_ user: String, by blocker: String) async throws(RealtimeFailure) -> Entry {
        guard user != blocker else { throw RealtimeFailure(.badRequest, "a user cannot block itself") }
        let rows: PostgresRows
        do {
            rows = try await database.query("""
                WITH target AS (SELECT u FROM accounts_existing_users(ARRAY[$2]::text[]) u),
                added AS (
                    INSERT INTO rt_blocks (blocker, blocked)
                    SELECT $1, u FROM target WHERE (SELECT count(*) FROM rt_blocks WHERE blocker = $1) < $3
                    ON CONFLICT DO NOTHING RETURNING created_at
                )
                SELECT (SELECT count(*) FROM target) AS exists,
                       coalesce((SELECT created_at FROM added), (SELECT created_at FROM rt_blocks WHERE blocker = $1 AND blocked = $2)) AS at,
                       (SELECT count(*) FROM added) AS added,
                       CASE WHEN (SELECT count(*) FROM added) > 0 THEN pg_notify('\(Self.channel)', $2) END AS notified
                """, [.text(blocker), .text(user), .int(Self.maxBlocksPerUser)])
        } catch {
            throw RealtimeFailure.database(error)
        }
        guard let row = rows.first, (row["exists"].int ?? 0) > 0 else {
            throw RealtimeFailure(.userNotFound, "no user \(user) exists", failedRecipients: [user])
        }
        guard let at = row["at"].timestampMilliseconds else {
            throw RealtimeFailure(.tooManyBlocks, "at most \(Self.maxBlocksPerUser) users can be blocked")
        }
        if (row["added"].int ?? 0) > 0 { invalidate(user) }
        return Entry(userId: user, blockedAt: at)
    }

    /// `blocker` unblocks `user` (no error when it was not blocked).
    public func unblock(_ user: String, by blocker: String) async throws(RealtimeFailure) {
        do {
            _ = try await database.query("""
                WITH removed AS (DELETE FROM rt_blocks WHERE blocker = $1 AND blocked = $2 RETURNING 1)
                SELECT pg_notify('\(Self.channel)', $2) FROM removed
                """, [.text(blocker), .text(user)])
        } catch {
            throw RealtimeFailure.database(error)
        }
        invalidate(user)
    }

    /// Drops what this node knows of `user`'s blockers.
    func invalidate(_ user: String) {
        state.withLock {
            $0.blockers[user] = nil
            $0.generation += 1
        }
    }

    private func setListening(_ listening: Bool) {
        state.withLock {
            $0.listening = listening
            $0.blockers = [:]
            $0.generation += 1
        }
    }

    /// Starts the LISTEN connection on `loop`; until it listens nothing is cached. Call once.
    func startListening(on loop: EventLoop, logger: Logger) {
        let configuration = database.configuration
        loop.execute { [self] in
            let listener = PostgresListener(loop: loop, configuration: configuration, logger: logger) { [self] notification in
                invalidate(notification.payload)
            }
            listener.onDisconnect = { [self] in setListening(false) }
            listener.onListening = { [self] in setListening(true) }
            listener.listen(Self.channel)
            listener.start()
            self.listener.withLock { $0 = listener }
        }
    }

    /// Closes the LISTEN connection, if any.
    func stopListening() {
        guard let listener = listener.withLock({ current -> PostgresListener? in
            defer { current = nil }
            return current
        }) else { return }
        setListening(false)
        listener.loop.execute { listener.close() }
    }
}
