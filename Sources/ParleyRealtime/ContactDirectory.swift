import ParleyPostgres
import Synchronization

/// Who reached whom (`rt_contacts`): a user reached another by sending them a message or calling
/// them. With the `contacts` presence scope a user's presence and typing reach only the users
/// the user reached.
///
/// The pairs known to be recorded are cached on this node (bounded), so a send between users who
/// wrote to each other before records nothing and a typing indicator between them reads nothing.
public final class ContactDirectory: Sendable {
    /// `from` reached `to`.
    struct Pair: Hashable {
        var from: String
        var to: String
    }

    let database: PostgresClient
    /// Pairs cached at most (the cache starts over past it).
    let capacity: Int
    private let known = Mutex<Set<Pair>>([])

    init(database: PostgresClient, capacity: Int = 100_000) {
        self.database = database
        self.capacity = capacity
    }

    /// Whether `from` is known on this node to have reached `to` (no database read).
    public func isKnown(from: String, to: String) -> Bool {
        from == to || known.withLock { $0.contains(Pair(from: from, to: to)) }
    }

    /// The pairs of `pairs` not known to be recorded (to record with the statement that makes them).
    func unrecorded(_ pairs: [(from: String, to: String)]) -> [(from: String, to: String)] {
        known.withLock { set in pairs.filter { $0.from != $0.to && !set.contains(Pair(from: $0.from, to: $0.to)) } }
    }

    /// Remembers pairs a committed statement recorded (`rt_add_contacts`) or a read found.
    public func remember(_ pairs: [(from: String, to: String)]) {
        guard !pairs.isEmpty else { return }
        known.withLock { set in
            if set.count + pairs.count > capacity { set.removeAll(keepingCapacity: true) }
            for pair in pairs { set.insert(Pair(from: pair.from, to: pair.to)) }
        }
    }

    /// The users among `others` who reached `user` (so whose presence and typing `user` may get);
    /// `user` itself counts.
    func reached(_ user: String, among others: [String]) async throws(RealtimeFailure) -> Set<String> {
        var found = Set(others.filter { isKnown(from: $0, to: user) })
        let unknown = Array(Set(others).subtracting(found))
        guard !unknown.isEmpty else { return found }
        let rows: PostgresRows
        do {
            rows = try await database.query("SELECT u FROM \(RealtimeSQLFunctions.reachedBy)($1, $2::text[]) u",
                                            [.text(user), .text(SQLArray.literal(unknown))])
        } catch {
            throw RealtimeFailure.database(error)
        }
        let reached = rows.compactMap { $0["u"].string }
        remember(reached.map { (from: $0, to: user) })
        found.formUnion(reached)
        return found
    }
}
