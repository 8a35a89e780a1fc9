import ParleyPostgres

/// Operator numbers of the accounts tables (`parley stats`).
public struct AccountsStats: Sendable, Equatable {
    public var users: Int
    public var bannedUsers: Int
    /// Sessions not expired yet.
    public var activeSessions: Int

    /// Counts them (one statement; `count(*)` scans, which suits an operator command).
    public static func read(from database: PostgresClient) async throws(PostgresError) -> AccountsStats {
        let row = try await database.query("""
            SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM users WHERE banned) AS banned,
                   (SELECT count(*) FROM sessions WHERE expires_at > now()) AS sessions
            """).first
        return AccountsStats(users: row?["users"].int ?? 0, bannedUsers: row?["banned"].int ?? 0,
                             activeSessions: row?["sessions"].int ?? 0)
    }
}
