import ParleyJSON
import ParleyLog
import Synchronization

/// Users as they see themselves (`GET /users/me`), in memory for a short TTL: bounded, and
/// invalidated by every write to the user through this node. Another node's write is seen
/// after at most the TTL (Parse Server caches users the same way).
public final class UserCache: Sendable {
    private struct Entry {
        let user: SessionUserJSON
        let cachedAt: Int64
    }

    private let entries = Mutex<[String: Entry]>([:])
    public let capacity: Int
    public let ttlMilliseconds: Int64
    private let clock: @Sendable () -> Int64

    public init(capacity: Int, ttlMilliseconds: Int64, clock: @escaping @Sendable () -> Int64 = UTCTime.nowMilliseconds) {
        self.capacity = max(1, capacity)
        self.ttlMilliseconds = max(0, ttlMilliseconds)
        self.clock = clock
    }

    /// The cached user's JSON with `"sessionToken":token` added (`SessionUserJSON.adding`).
    public func serialized(_ userId: String, sessionToken: String) -> [UInt8]? {
        entry(userId)?.user.adding(sessionToken: sessionToken)
    }

    private func entry(_ userId: String) -> Entry? {
        let now = clock()
        return entries.withLock { entries -> Entry? in
            guard let entry = entries[userId] else { return nil }
            guard now - entry.cachedAt < ttlMilliseconds else {
                entries[userId] = nil
                return nil
            }
            return entry
        }
    }

    /// Caches a user as it sees itself (written by `RowJSON` for that viewer).
    public func put(_ userId: String, _ user: SessionUserJSON) {
        guard ttlMilliseconds > 0 else { return }
        let now = clock()
        entries.withLock { entries in
            if entries.count >= capacity, entries[userId] == nil {
                // Drop expired entries; if none, drop an arbitrary eighth to stay bounded.
                let expired = entries.filter { now - $0.value.cachedAt >= ttlMilliseconds }.map(\.key)
                if expired.isEmpty {
                    for key in entries.keys.prefix(max(1, capacity / 8)) { entries[key] = nil }
                } else {
                    for key in expired { entries[key] = nil }
                }
            }
            entries[userId] = Entry(user: user, cachedAt: now)
        }
    }

    public func invalidate(_ userId: String) {
        entries.withLock { $0[userId] = nil }
    }

    public func removeAll() {
        entries.withLock { $0.removeAll() }
    }

    public var count: Int { entries.withLock { $0.count } }
}

/// A user's JSON as `me` and login answer it: the user as it sees itself plus the caller's
/// `"sessionToken"`, which is added last. Kept serialized up to `"sessionToken":`, so adding a
/// token is one allocation of the final size and two copies.
public struct SessionUserJSON: Sendable {
    private let prefix: [UInt8]

    /// `user` is a serialized JSON object.
    public init(user: [UInt8]) {
        var prefix = user
        precondition(prefix.last == UInt8(ascii: "}"), "not a serialized JSON object")
        prefix.removeLast()
        prefix.append(prefix.count == 1 ? #""sessionToken":"# : #","sessionToken":"#)
        self.prefix = prefix
    }

    /// The user with `"sessionToken":token` as its last member.
    public func adding(sessionToken: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(prefix.count + sessionToken.utf8.count + 3)
        bytes.append(contentsOf: prefix)
        JSONSerializer.writeString(sessionToken, into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
