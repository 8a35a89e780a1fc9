import ParleyLog
import ParleyPostgres
import Synchronization

/// Records ended connections in PostgreSQL (the device is no longer connected to this node), in
/// batches, retrying until the database takes them.
///
/// Why: a fleet of clients dropping at once (a network cut, a load balancer restart) ends
/// thousands of connections in the same second. One statement per disconnect would overflow the
/// pool's bounded waiters, and a dropped record leaves the device marked as connected here, so
/// its queued events would not become push jobs. Pending entries are bounded by `maxPending`
/// (at most one per ended connection); past it the oldest are dropped with an error log, and the
/// node heartbeat's stale-node cleanup is the remaining safety net.
final class DisconnectRecorder: Sendable {
    /// One ended connection of a device.
    struct Entry: Sendable {
        var key: DeviceKey
        var connectionID: UInt64
    }

    private struct State {
        var pending: [Entry] = []
        var draining = false
        var dropped = 0
        /// How many entries at the front belong to the batch being written.
        var inFlight = 0
    }

    private let database: PostgresClient
    private let nodeID: String
    private let logger: Logger
    private let maxBatch: Int
    private let maxPending: Int
    private let retryDelay: Duration
    private let state = Mutex(State())

    init(database: PostgresClient, nodeID: String, logger: Logger,
         maxBatch: Int = 1_000, maxPending: Int = 1_000_000, retryDelay: Duration = .seconds(1)) {
        self.database = database
        self.nodeID = nodeID
        self.logger = logger
        self.maxBatch = max(1, maxBatch)
        self.maxPending = max(1, maxPending)
        self.retryDelay = retryDelay
    }

    /// Entries not yet recorded.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Queues the record; returns at once. Entries are written in the order they were queued.
    func record(_ key: DeviceKey, connectionID: UInt64) {
        let start = state.withLock { state -> Bool in
            if state.pending.count >= maxPending {
                state.pending.removeFirst()
                state.dropped += 1
                if state.inFlight > 0 { state.inFlight -= 1 }
            }
            state.pending.append(Entry(key: key, connectionID: connectionID))
            guard !state.draining else { return false }
            state.draining = true
            return true
        }
        if start {
            Task { await drain() }
        }
    }

    private func drain() async {
        var failures = 0
        while true {
            let (batch, dropped) = state.withLock { state -> ([Entry], Int) in
                let batch = Array(state.pending.prefix(maxBatch))
                let dropped = state.dropped
                state.dropped = 0
                state.inFlight = batch.count
                if batch.isEmpty { state.draining = false }
                return (batch, dropped)
            }
            if dropped > 0 {
                logger.error("disconnect records dropped (too many pending)", [("count", String(dropped))])
            }
            guard !batch.isEmpty else { return }
            do {
                try await write(batch)
                failures = 0
                state.withLock { state in
                    state.pending.removeFirst(state.inFlight)
                    state.inFlight = 0
                }
            } catch {
                state.withLock { $0.inFlight = 0 }
                failures += 1
                if failures == 1 || failures % 60 == 0 {
                    logger.warning("could not record disconnects; retrying", [("count", String(batch.count)), ("error", "\(error)")])
                }
                try? await Task.sleep(for: retryDelay)
            }
        }
    }

    private func write(_ batch: [Entry]) async throws(PostgresError) {
        _ = try await database.query("""
            UPDATE rt_devices d SET node_id = NULL, connection_id = NULL, last_seen_at = now()
              FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(user_id, device_id, connection_id)
             WHERE d.user_id = x.user_id AND d.device_id = x.device_id
               AND d.connection_id = x.connection_id AND d.node_id = $4
            """, [
                .text(SQLArray.literal(batch.map(\.key.userId))),
                .text(SQLArray.literal(batch.map(\.key.deviceId))),
                .text(SQLArray.literal(batch.map { Int64(truncatingIfNeeded: $0.connectionID) })),
                .text(nodeID),
            ])
    }
}
