import ParleyPostgres

/// Who a valid session token belongs to, and until when it is valid.
public struct RealtimeIdentity: Sendable, Equatable {
    public let userId: String
    /// When the session expires, milliseconds since the Unix epoch (a socket is closed then).
    public let sessionExpiresAt: Int64

    public init(userId: String, sessionExpiresAt: Int64) {
        self.userId = userId
        self.sessionExpiresAt = sessionExpiresAt
    }
}

/// Resolves session tokens for the realtime service and the `/v1` endpoints. The server wires
/// in the accounts module's implementation; `SQLRealtimeAuthenticator` reads the tables directly.
public protocol RealtimeAuthenticator: Sendable {
    /// The identity of a valid session (nil when unknown, expired, revoked, or the user is banned).
    func authenticate(sessionToken: String) async throws -> RealtimeIdentity?
    /// Whether the user exists.
    func userExists(_ userId: String) async throws -> Bool
}

/// Reads the `sessions` and `users` tables (migrations/0002_accounts.sql) on every call.
public struct SQLRealtimeAuthenticator: RealtimeAuthenticator {
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func authenticate(sessionToken: String) async throws -> RealtimeIdentity? {
        guard !sessionToken.isEmpty, sessionToken.utf8.count <= 256, !sessionToken.utf8.contains(0) else { return nil }
        let rows = try await database.query("""
            SELECT s.user_id, s.expires_at FROM sessions s JOIN users u ON u.object_id = s.user_id
             WHERE s.token = $1 AND s.expires_at > now() AND NOT u.banned
            """, [.text(sessionToken)])
        guard let row = rows.first, let userId = row["user_id"].string, let expiresAt = row["expires_at"].timestampMilliseconds else { return nil }
        return RealtimeIdentity(userId: userId, sessionExpiresAt: expiresAt)
    }

    public func userExists(_ userId: String) async throws -> Bool {
        let rows = try await database.query("SELECT 1 FROM users WHERE object_id = $1", [.text(userId)])
        return !rows.isEmpty
    }
}
