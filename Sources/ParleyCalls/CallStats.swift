import ParleyPostgres

/// Operator numbers of the call records (`parley stats`).
public struct CallStats: Sendable, Equatable {
    /// Calls started since midnight UTC.
    public var callsToday: Int
    /// Calls not ended yet.
    public var liveCalls: Int

    public static func read(from database: PostgresClient) async throws(PostgresError) -> CallStats {
        let row = try await database.query("""
            SELECT (SELECT count(*) FROM calls WHERE started_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
                   (SELECT count(*) FROM calls WHERE state <> 'ended') AS live
            """).first
        return CallStats(callsToday: row?["today"].int ?? 0, liveCalls: row?["live"].int ?? 0)
    }
}
