import ParleyPostgres

/// Operator numbers of the push jobs (`parley stats`).
public struct PushStats: Sendable, Equatable {
    /// Every job state, in the order of a job's life.
    public static let states = ["pending", "sending", "sent", "dead", "rejected", "skipped", "canceled", "expired"]

    /// Jobs per state, every state of `states` present (0 when none).
    public var jobsByState: [(state: String, count: Int)]

    public static func == (a: PushStats, b: PushStats) -> Bool {
        a.jobsByState.elementsEqual(b.jobsByState) { $0.state == $1.state && $0.count == $1.count }
    }

    public static func read(from database: PostgresClient) async throws(PostgresError) -> PushStats {
        let rows = try await database.query("SELECT state, count(*) AS n FROM push_jobs GROUP BY state")
        var counts: [String: Int] = [:]
        for row in rows {
            if let state = row["state"].string { counts[state] = row["n"].int ?? 0 }
        }
        return PushStats(jobsByState: states.map { ($0, counts[$0] ?? 0) })
    }
}
