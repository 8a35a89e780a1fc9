import Glibc
import ParleyLog
import Synchronization

/// Valid sessions by token, in memory: bounded (oldest entries evicted first) and each entry
/// trusted for a TTL only. Invalidated by token or by user on logout, revoke, ban, password
/// change and delete, on this node and (through `AccountEvents`) on every other. Misses and
/// expired entries go back to PostgreSQL.
///
/// Two rules keep a revoked or banned session from being served from memory:
/// - A session read from PostgreSQL is cached only if no invalidation happened since the read
///   began (`mark()`, then `put(_:since:)`): an event that arrived while the read was in flight
///   may concern that very session.
/// - While this node may be missing events (its LISTEN connection is down or not yet up) the
///   cache is `suspend`ed: it serves nothing and keeps nothing, so every lookup reads PostgreSQL.
///
/// Entries are found by a digest of the token and then checked against the token itself, so a
/// lookup can use a header's bytes without making a string. The digest is cheap, not secret:
/// the dictionary hashes it again with its own seeded hasher, only server-made random tokens are
/// ever stored, and a token whose digest matches another's is simply a miss.
public final class SessionCache: Sendable {
    private struct Entry {
        let info: SessionInfo
        let cachedAt: Int64
    }

    private struct State {
        /// By `digest(token)`; an entry holds its token (`info.token`).
        var entries: [UInt64: Entry] = [:]
        var tokensByUser: [String: Set<String>] = [:]
        /// Insertion order for eviction; may hold tokens already removed (skipped).
        var order: [String] = []
        var head = 0
        /// Invalidations so far (see `Mark`).
        var epoch: UInt64 = 0
        /// False while suspended.
        var trusted = true
    }

    /// The invalidation count when a read from PostgreSQL began.
    public struct Mark: Sendable {
        fileprivate let epoch: UInt64
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

    /// Taken before reading a session from PostgreSQL, for `put(_:since:)`.
    public func mark() -> Mark {
        Mark(epoch: state.withLock { $0.epoch })
    }

    /// The cached session for `token` if fresh and not expired.
    public func get(_ token: String) -> SessionInfo? {
        var token = token
        return token.withUTF8 { get(token: $0) }
    }

    /// `get` for a token's UTF-8 bytes (a header value read in place).
    public func get(token: UnsafeBufferPointer<UInt8>) -> SessionInfo? {
        let key = Self.digest(token)
        let now = clock()
        return state.withLock { state -> SessionInfo? in
            guard let entry = state.entries[key], Self.bytes(token, equal: entry.info.token) else { return nil }
            guard now - entry.cachedAt < ttlMilliseconds, entry.info.isLive(at: now) else {
                Self.remove(entry.info.token, from: &state)
                return nil
            }
            return entry.info
        }
    }

    /// Caches a session read (or created) after `mark` was taken, unless something was
    /// invalidated since or the cache is suspended.
    public func put(_ info: SessionInfo, since mark: Mark) {
        guard ttlMilliseconds > 0 else { return }
        let now = clock()
        let key = Self.digest(info.token)
        state.withLock { state in
            guard state.trusted, state.epoch == mark.epoch else { return }
            if let other = state.entries[key]?.info.token, other != info.token {
                // Another token with the same digest: this one takes its place.
                Self.remove(other, from: &state)
            }
            if state.entries[key] == nil {
                while state.entries.count >= capacity, state.head < state.order.count {
                    let victim = state.order[state.head]
                    state.head += 1
                    Self.remove(victim, from: &state)
                }
                state.order.append(info.token)
            }
            state.entries[key] = Entry(info: info, cachedAt: now)
            state.tokensByUser[info.userId, default: []].insert(info.token)
            if state.head > 4096 && state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// Drops one token.
    public func invalidate(token: String) {
        state.withLock { state in
            state.epoch &+= 1
            Self.remove(token, from: &state)
        }
    }

    /// Drops every cached session of a user.
    public func invalidate(userId: String) {
        state.withLock { state in
            state.epoch &+= 1
            for token in state.tokensByUser[userId] ?? [] {
                let key = Self.digest(token)
                if state.entries[key]?.info.token == token { state.entries[key] = nil }
            }
            state.tokensByUser[userId] = nil
        }
    }

    /// Drops everything (after missed cross-node events).
    public func removeAll() {
        state.withLock { state in state = State(epoch: state.epoch &+ 1, trusted: state.trusted) }
    }

    /// Drops everything and serves nothing until `resume()`: events may be missed meanwhile.
    public func suspend() {
        state.withLock { state in state = State(epoch: state.epoch &+ 1, trusted: false) }
    }

    /// Serves and caches again, starting empty (call once events are received again).
    public func resume() {
        state.withLock { state in state = State(epoch: state.epoch &+ 1, trusted: true) }
    }

    /// Whether the cache serves sessions (false while suspended).
    public var isTrusted: Bool { state.withLock { $0.trusted } }

    /// Number of cached sessions.
    public var count: Int { state.withLock { $0.entries.count } }

    private static func remove(_ token: String, from state: inout State) {
        let key = digest(token)
        guard let entry = state.entries[key], entry.info.token == token else { return }
        state.entries[key] = nil
        let userId = entry.info.userId
        state.tokensByUser[userId]?.remove(token)
        if state.tokensByUser[userId]?.isEmpty == true { state.tokensByUser[userId] = nil }
    }

    private static func digest(_ token: String) -> UInt64 {
        var token = token
        return token.withUTF8 { digest($0) }
    }

    /// A 64-bit mix of the bytes, eight at a time (see the type's comment for why it need not be keyed).
    private static func digest(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        var hash = UInt64(truncatingIfNeeded: bytes.count) &* multiplier
        var index = 0
        while bytes.count - index >= 8 {
            let word = UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress.unsafelyUnwrapped + index).loadUnaligned(as: UInt64.self))
            hash = (hash ^ word) &* multiplier
            hash ^= hash >> 29
            index += 8
        }
        while index < bytes.count {
            hash = (hash ^ UInt64(bytes[index])) &* multiplier
            index += 1
        }
        return hash ^ (hash >> 32)
    }

    private static func bytes(_ bytes: UnsafeBufferPointer<UInt8>, equal token: String) -> Bool {
        var token = token
        return token.withUTF8 { stored in
            stored.count == bytes.count && (bytes.isEmpty || memcmp(stored.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
    }
}
