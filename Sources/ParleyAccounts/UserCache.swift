import ParleyJSON
import ParleyLog
import Synchronization

/// Users as they see themselves (`GET /users/me`), in memory for a short TTL: bounded, and
/// invalidated by every write to the user through this node. Another node's write is seen
/// after at most the TTL (Parse Server caches users the same way).
public final class UserCache: Sendable {
    private struct Entry {
        let user: JSONObject
        /// `user` serialized up to an added `"sessionToken":` (the token, as a JSON string, and
        /// the closing brace are appended per request).
        let tokenPrefix: [UInt8]
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

    public func get(_ userId: String) -> JSONObject? {
        entry(userId)?.user
    }

    /// The cached user serialized with `"sessionToken":token` added, without building an object:
    /// the prefix and the token are written into one allocation of the final size (a token that
    /// needs escapes, never one Parley makes, grows it once).
    public func serialized(_ userId: String, sessionToken: String) -> [UInt8]? {
        guard let entry = entry(userId) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entry.tokenPrefix.count + sessionToken.utf8.count + 3)
        bytes.append(contentsOf: entry.tokenPrefix)
        JSONSerializer.writeString(sessionToken, into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return bytes
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

    public func put(_ userId: String, _ user: JSONObject) {
        guard ttlMilliseconds > 0 else { return }
        let now = clock()
        var prefix: [UInt8] = []
        JSONValue.object(user).serialize(into: &prefix)
        prefix.removeLast()
        prefix.append(user.isEmpty ? #""sessionToken":"# : #","sessionToken":"#)
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
            entries[userId] = Entry(user: user, tokenPrefix: prefix, cachedAt: now)
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
