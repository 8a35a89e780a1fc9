#if canImport(Glibc)
import Glibc
#endif

/// The server-side prepared statements of one connection, by SQL text and parameter types.
///
/// Bounded: when full, preparing another statement evicts the least recently used one, which the
/// connection then closes on the server (`DEALLOCATE`), so the hot statements of a process stay
/// prepared however many distinct ones it has run. Each entry also keeps the column metadata of
/// its last result, so decoding a result of a cached statement builds no column index.
///
/// Thread confinement: owned by one `PostgresConnection` and used only on its loop.
struct PreparedStatementCache {
    /// What identifies a prepared statement: the same text with other parameter types is another one.
    struct Key: Hashable {
        let sql: String
        let types: [UInt32]

        /// Hashes the length, the types and at most `sampledBytes` of the text (the end, where
        /// compiled queries differ: their WHERE, ORDER BY and LIMIT), not all of it: hashing
        /// a whole SELECT cost more than the rest of a statement's lookup. Equality still
        /// compares the whole text, so statements that share the sampled bytes only share a bucket.
        func hash(into hasher: inout Hasher) {
            var sql = sql
            sql.withUTF8 { bytes in
                hasher.combine(bytes.count)
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[max(0, bytes.count - Self.sampledBytes)...])))
            }
            hasher.combine(types)
        }

        static let sampledBytes = 96
    }

    /// One prepared statement (or one being prepared: its PREPARE may still be in flight).
    final class Entry {
        let key: Key
        /// The statement's name on the server (`parley_<n>`, unique per connection).
        let name: String
        /// `name` as the C string libpq takes, made once rather than for every execution.
        let cName: UnsafeMutablePointer<CChar>
        fileprivate(set) var lastUse: UInt64
        /// Columns of its last result; reused while the server describes the same columns.
        var columns: PostgresColumns?

        fileprivate init(key: Key, name: String, lastUse: UInt64) {
            self.key = key
            self.name = name
            cName = strdup(name)
            self.lastUse = lastUse
        }

        deinit {
            free(cName)
        }
    }

    /// Most statements kept; 0 disables preparing.
    let capacity: Int
    private var entries: [Key: Entry] = [:]
    private var useClock: UInt64 = 0
    private var nameCounter = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { entries.count }

    /// The cached statement for `key`, marked as just used.
    mutating func lookup(_ key: Key) -> Entry? {
        guard let entry = entries[key] else { return nil }
        useClock &+= 1
        entry.lastUse = useClock
        return entry
    }

    /// A new entry for `key` (not cached yet), plus the entry evicted to make room, if any.
    /// The caller prepares the new statement and closes the evicted one on the server.
    mutating func insert(_ key: Key) -> (entry: Entry, evicted: Entry?) {
        precondition(capacity > 0, "PreparedStatementCache: inserting with preparing disabled")
        var evicted: Entry?
        if entries.count >= capacity, let oldest = entries.values.min(by: { $0.lastUse < $1.lastUse }) {
            entries[oldest.key] = nil
            evicted = oldest
        }
        nameCounter += 1
        useClock &+= 1
        let entry = Entry(key: key, name: "parley_\(nameCounter)", lastUse: useClock)
        entries[key] = entry
        return (entry, evicted)
    }

    /// Forgets `entry` if it is still the cached one for its key (its PREPARE failed, or its plan
    /// went stale). Returns whether it was.
    @discardableResult
    mutating func remove(_ entry: Entry) -> Bool {
        guard entries[entry.key] === entry else { return false }
        entries[entry.key] = nil
        return true
    }

    /// Forgets everything (the connection was lost: the server dropped its statements too).
    mutating func removeAll() {
        entries.removeAll()
    }
}
