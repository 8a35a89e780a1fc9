import Synchronization

/// Live numbers of one pool (or a listener), readable from any thread for metrics.
public final class PostgresPoolStats: Sendable {
    let open = Atomic<Int>(0)
    let connecting = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)
    let waiting = Atomic<Int>(0)
    let reconnects = Atomic<Int>(0)
    let statements = Atomic<Int>(0)
    /// 1 while the pool knows the database is unreachable (statements fail at once).
    let unreachable = Atomic<Int>(0)
    /// Cursors declared and not yet closed (`PostgresCursor`).
    let cursors = Atomic<Int>(0)

    public init() {}

    /// A consistent-enough copy of the numbers.
    public struct Snapshot: Sendable, Equatable {
        /// Connections ready for statements.
        public var connectionsOpen: Int
        /// Connections connecting or waiting to reconnect.
        public var connectionsConnecting: Int
        /// Statements sent and not yet answered.
        public var queriesInFlight: Int
        /// Statements waiting for a usable connection.
        public var waiters: Int
        /// Connections lost and re-established (attempts started after a loss).
        public var reconnects: Int
        /// Statements sent since start.
        public var statementsSent: Int
        /// Pools that know the database is unreachable (their statements fail at once).
        public var unreachablePools: Int
        /// Cursors declared and not yet closed.
        public var openCursors: Int = 0

        public static func + (a: Snapshot, b: Snapshot) -> Snapshot {
            Snapshot(connectionsOpen: a.connectionsOpen + b.connectionsOpen,
                     connectionsConnecting: a.connectionsConnecting + b.connectionsConnecting,
                     queriesInFlight: a.queriesInFlight + b.queriesInFlight, waiters: a.waiters + b.waiters,
                     reconnects: a.reconnects + b.reconnects, statementsSent: a.statementsSent + b.statementsSent,
                     unreachablePools: a.unreachablePools + b.unreachablePools, openCursors: a.openCursors + b.openCursors)
        }

        public static let zero = Snapshot(connectionsOpen: 0, connectionsConnecting: 0, queriesInFlight: 0, waiters: 0, reconnects: 0, statementsSent: 0, unreachablePools: 0)
    }

    public var snapshot: Snapshot {
        Snapshot(connectionsOpen: open.load(ordering: .relaxed), connectionsConnecting: connecting.load(ordering: .relaxed),
                 queriesInFlight: inFlight.load(ordering: .relaxed), waiters: waiting.load(ordering: .relaxed),
                 reconnects: reconnects.load(ordering: .relaxed), statementsSent: statements.load(ordering: .relaxed),
                 unreachablePools: unreachable.load(ordering: .relaxed), openCursors: cursors.load(ordering: .relaxed))
    }
}
