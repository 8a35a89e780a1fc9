import ParleyLog
import Synchronization

/// Valid sessions by token, in memory: bounded (oldest entries evicted first) and each entry
/// trusted for a TTL only. Invalidated by token or by user on logout, revoke, ban, password
/// change and delete. Misses and expired entries go back to PostgreSQL.
public final class SessionCache: Sendable {
    private struct Entry {
        let info: SessionInfo
        let cachedAt: Int64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var tokensByUser: [String: Set<String>] = [:]
        /// Insertion order for eviction; may hold tokens already removed (skipped).
        var order: [String] = []
        var head = 0
    }

    private let state = Mutex(State())
    public let capacity: Int
    public let ttlMilliseconds: Int64
    private let clock: @Sendable () -> Int64

    public init(capacity: Int, ttlSeconds: Int64, clock: @escaping @Sendable () -> Int64 = UTCTime.nowMilliseconds) {
        self.capacity = max(1, capacity)
        self.ttlMilliseconds = ttlSeconds * 1000
        self.clock = clock
    }

    /// The cached session for `token` if fresh and not expired.
    public func get(_ token: String) -> SessionInfo? {
        let now = clock()
        return state.withLock { state -> SessionInfo? in
            guard let entry = state.entries[token] else { return nil }
            guard now - entry.cachedAt < ttlMilliseconds, entry.info.expiresAt > now else {
                Self.remove(token, from: &state)
                return nil
            }
            return entry.info
        }
    }

    public func put(_ info: SessionInfo) {
        guard ttlMilliseconds > 0 else { return }
        let now = clock()
        state.withLock { state in
            if state.entries[info.token] == nil {
                while state.entries.count >= capacity, state.head < state.order.count {
                    let victim = state.order[state.head]
                    state.head += 1
                    Self.remove(victim, from: &state)
                }
                state.order.append(info.token)
            }
            state.entries[info.token] = Entry(info: info, cachedAt: now)
            state.tokensByUser[info.userId, default: []].insert(info.token)
            if state.head > 4096 && state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// Drops one token.
    public func invalidate(token: String) {
        state.withLock { state in Self.remove(token, from: &state) }
    }

    /// Drops every cached session of a user.
    public func invalidate(userId: String) {
        state.withLock { state in
            for token in state.tokensByUser[userId] ?? [] {
                state.entries[token] = nil
            }
            state.tokensByUser[userId] = nil
        }
    }

    /// Drops everything (after missed cross-node events).
    public func removeAll() {
        state.withLock { $0 = State() }
    }

    /// Number of cached sessions.
    public var count: Int { state.withLock { $0.entries.count } }

    private static func remove(_ token: String, from state: inout State) {
        guard let entry = state.entries.removeValue(forKey: token) else { return }
        let userId = entry.info.userId
        state.tokensByUser[userId]?.remove(token)
        if state.tokensByUser[userId]?.isEmpty == true { state.tokensByUser[userId] = nil }
    }
}
