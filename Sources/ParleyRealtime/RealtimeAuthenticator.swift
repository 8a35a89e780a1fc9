import ParleyPostgres

/// Resolves session tokens for the realtime service (the accounts module's session cache can
/// implement it; `SQLRealtimeAuthenticator` reads the tables directly).
public protocol RealtimeAuthenticator: Sendable {
    /// The user id of a valid session (nil when unknown, expired, or the user is banned).
    func authenticate(sessionToken: String) async throws -> String?
    /// Whether the user exists.
    func userExists(_ userId: String) async throws -> Bool
}

/// Reads the `sessions` and `users` tables (migrations/0002_accounts.sql) on every call.
public struct SQLRealtimeAuthenticator: RealtimeAuthenticator {
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func authenticate(sessionToken: String) async throws -> String? {
        guard !sessionToken.isEmpty, sessionToken.utf8.count <= 256, !sessionToken.utf8.contains(0) else { return nil }
        let rows = try await database.query("""
            SELECT s.user_id FROM sessions s JOIN users u ON u.object_id = s.user_id
             WHERE s.token = $1 AND s.expires_at > now() AND NOT u.banned
            """, [.text(sessionToken)])
        return rows.first?["user_id"].string
    }

    public func userExists(_ userId: String) async throws -> Bool {
        let rows = try await database.query("SELECT 1 FROM users WHERE object_id = $1", [.text(userId)])
        return !rows.isEmpty
    }
}
