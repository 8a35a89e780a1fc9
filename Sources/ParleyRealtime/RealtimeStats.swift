import ParleyPostgres

/// Operator numbers of the realtime tables (`parley stats`).
public struct RealtimeStats: Sendable, Equatable {
    /// Devices connected to a live node.
    public var devicesOnline: Int
    /// Devices known (connected or not, until retention forgets them).
    public var devices: Int
    /// Events queued for devices and not acknowledged yet.
    public var queuedEvents: Int
    /// Nodes whose heartbeat is fresh.
    public var liveNodes: Int

    /// Counts them. A node silent for `nodeStaleAfter` is stopped: its devices are not online
    /// (as the heartbeat would record within one interval).
    public static func read(from database: PostgresClient,
                            nodeStaleAfter: Duration = RealtimeConfiguration().nodeStaleAfter) async throws(PostgresError) -> RealtimeStats {
        let row = try await database.query("""
            WITH live AS (SELECT node_id FROM rt_nodes WHERE heartbeat_at >= now() - make_interval(secs => $1))
            SELECT (SELECT count(*) FROM rt_devices d JOIN live l ON l.node_id = d.node_id) AS online,
                   (SELECT count(*) FROM rt_devices) AS devices, (SELECT count(*) FROM rt_queue) AS queued,
                   (SELECT count(*) FROM live) AS nodes
            """, [.int(Int(nodeStaleAfter.components.seconds))]).first
        return RealtimeStats(devicesOnline: row?["online"].int ?? 0, devices: row?["devices"].int ?? 0,
                             queuedEvents: row?["queued"].int ?? 0, liveNodes: row?["nodes"].int ?? 0)
    }
}
