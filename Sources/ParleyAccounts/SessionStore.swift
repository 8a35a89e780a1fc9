import ParleyJSON
import ParleyLog
import ParleyPostgres

/// `_Session` rows: creation on signup/login, lookup by token (cached), listing and revocation.
public struct SessionStore: Sendable {
    public let cache: SessionCache
    public let lifetimeSeconds: Int64
    let events: AccountEvents

    init(cache: SessionCache, lifetimeSeconds: Int64, events: AccountEvents) {
        self.cache = cache
        self.lifetimeSeconds = lifetimeSeconds
        self.events = events
    }

    /// How the session was created (`createdWith.action`).
    public enum Action: String, Sendable {
        case signup, login
    }

    static let columns = "object_id, token, user_id, created_with, installation_id, restricted, expires_at, created_at, updated_at"

    /// Whether `token` has the shape Parley issues (`r:` + 32 lowercase hex).
    public static func isWellFormed(_ token: String) -> Bool {
        let utf8 = Array(token.utf8)
        guard utf8.count == 34, utf8[0] == UInt8(ascii: "r"), utf8[1] == UInt8(ascii: ":") else { return false }
        return utf8[2...].allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    /// SQL and parameters inserting a session for `userIdSQL` (a placeholder or subquery), with
    /// the parameters appended to `builder`. Used alone and inside the signup statement.
    func insertSQL(userId: String, action: Action, authProvider: String, installationId: String?, now: Int64,
                   builder: inout SQLBuilder) -> (sql: String, info: SessionInfo) {
        let info = SessionInfo(sessionId: RandomID.objectID(), token: RandomID.sessionToken(), userId: userId,
                               expiresAt: now + lifetimeSeconds * 1000, installationId: installationId)
        let createdWith: JSONValue = ["action": .string(action.rawValue), "authProvider": .string(authProvider)]
        let sql = """
            INSERT INTO sessions (object_id, token, user_id, created_with, installation_id, expires_at, created_at, updated_at)
            VALUES (\(builder.bind(.text(info.sessionId))), \(builder.bind(.text(info.token))), \(builder.bind(.text(userId))), \
            \(builder.bind(.json(createdWith.serialized()))), \(builder.bind(installationId.map(PostgresData.text) ?? .null)), \
            \(builder.bind(.timestamp(milliseconds: info.expiresAt))), \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
            """
        return (sql, info)
    }

    /// Creates a session. As Parse does, other sessions of the same user and installation are
    /// removed first (one session per device). `mark` is the session cache's mark taken before
    /// the caller read the user (its ban state). `authProvider` is `createdWith.authProvider`:
    /// `password`, or the authData providers of the login joined with `,`.
    public func create(userId: String, action: Action, authProvider: String = "password", installationId: String?,
                       since mark: SessionCache.Mark, on db: any SQLExecutor) async throws(ParseError) -> SessionInfo {
        let now = UTCTime.nowMilliseconds()
        var builder = SQLBuilder()
        let (insert, info) = insertSQL(userId: userId, action: action, authProvider: authProvider, installationId: installationId,
                                       now: now, builder: &builder)
        if let installationId {
            let removed = try await db.run("DELETE FROM sessions WHERE user_id = $1 AND installation_id = $2 RETURNING token", [.text(userId), .text(installationId)])
            for row in removed {
                if let token = row["token"].string { try await events.publish(.sessionRevoked(token: token, userId: userId), on: db) }
            }
        }
        try await db.run(insert, builder.params)
        cache.put(info, since: mark)
        return info
    }

    // MARK: The session-validity rule

    // A session token is valid while its row exists (logout, revocation, password change and
    // deletion delete it), it has not expired (`SessionInfo.isLive`) and its user is not banned.
    // PostgreSQL answers all three in `lookup`'s one statement; the cache answers from memory
    // only what that statement answered and no event has invalidated since (`SessionCache`).
    // Every path asks here: the REST pipeline (`/parse`, its inline answers, batch
    // sub-requests through their batch), `/v1` and the socket `hello` (through the server's
    // `RealtimeAuthenticator`).

    /// The valid session for `token`: 209 when unknown, revoked, expired or of a banned user.
    public func lookup(_ token: String, on db: any SQLExecutor) async throws(ParseError) -> SessionInfo {
        if let cached = cache.get(token) { return cached }
        guard Self.isWellFormed(token) else { throw ParseError.invalidSession }
        let mark = cache.mark()
        let rows = try await db.run("""
            SELECT s.object_id, s.user_id, s.installation_id, s.expires_at FROM sessions s
            JOIN users u ON u.object_id = s.user_id WHERE s.token = $1 AND NOT u.banned
            """, [.text(token)], readOnly: true)
        guard let row = rows.first, let sessionId = row["object_id"].string, let userId = row["user_id"].string,
              let expiresAt = row["expires_at"].timestampMilliseconds else {
            throw ParseError.invalidSession
        }
        let info = SessionInfo(sessionId: sessionId, token: token, userId: userId, expiresAt: expiresAt, installationId: row["installation_id"].string)
        guard info.isLive(at: UTCTime.nowMilliseconds()) else { throw ParseError.expiredSession }
        cache.put(info, since: mark)
        return info
    }

    /// `lookup` answered from memory alone, for a token's UTF-8 bytes read in place (an inline
    /// answer on the event loop); nil when only PostgreSQL can tell.
    @inline(__always)
    public func cachedSession(token: UnsafeBufferPointer<UInt8>) -> SessionInfo? {
        cache.get(token: token)
    }

    /// Deletes the session with this token (logout). Returns whether one existed.
    @discardableResult
    public func revoke(token: String, on db: any SQLExecutor) async throws(ParseError) -> Bool {
        cache.invalidate(token: token)
        let rows = try await db.run("DELETE FROM sessions WHERE token = $1 RETURNING user_id", [.text(token)])
        guard let userId = rows.first?["user_id"].string else { return false }
        try await events.publish(.sessionRevoked(token: token, userId: userId), on: db)
        return true
    }

    /// Deletes the session with this objectId if `auth` may (its owner or master). 101 otherwise.
    public func revoke(sessionId: String, auth: Auth, on db: any SQLExecutor) async throws(ParseError) {
        var builder = SQLBuilder()
        var sql = "DELETE FROM sessions WHERE object_id = \(builder.bind(.text(sessionId)))"
        if !auth.isMaster {
            guard let userId = auth.userId else { throw ParseError.objectNotFound("Object not found for delete.") }
            sql += " AND user_id = \(builder.bind(.text(userId)))"
        }
        let rows = try await db.run(sql + " RETURNING token, user_id", builder.params)
        guard let token = rows.first?["token"].string, let userId = rows.first?["user_id"].string else {
            throw ParseError.objectNotFound("Object not found for delete.")
        }
        try await events.publish(.sessionRevoked(token: token, userId: userId), on: db)
    }

    /// Deletes every session of a user except `keeping` (a session objectId). Returns how many.
    @discardableResult
    public func revokeAll(userId: String, keeping: String? = nil, reason: AccountEvent.Reason, on db: any SQLExecutor) async throws(ParseError) -> Int {
        cache.invalidate(userId: userId)
        let rows: PostgresRows
        if let keeping {
            rows = try await db.run("DELETE FROM sessions WHERE user_id = $1 AND object_id <> $2 RETURNING object_id", [.text(userId), .text(keeping)])
        } else {
            rows = try await db.run("DELETE FROM sessions WHERE user_id = $1 RETURNING object_id", [.text(userId)])
        }
        try await events.publish(.sessionsRevoked(userId: userId, reason: reason, keeping: keeping), on: db)
        return rows.count
    }

    /// Sessions of one user (or of everyone for nil), newest first, as `{"results":[…]}`.
    public func list(userId: String?, limit: Int, skip: Int, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        var builder = SQLBuilder()
        var sql = "SELECT \(Self.columns) FROM sessions"
        if let userId { sql += " WHERE user_id = \(builder.bind(.text(userId)))" }
        sql += " ORDER BY created_at DESC, object_id LIMIT \(builder.bind(.int(limit))) OFFSET \(builder.bind(.int(skip)))"
        return RowJSON.results(.session, try await db.run(sql, builder.params), count: nil, viewer: .master, keys: nil)
    }

    /// One session by objectId as JSON, if `auth` may see it (owner or master).
    public func get(sessionId: String, auth: Auth, keys: [String]? = nil, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        var builder = SQLBuilder()
        var sql = "SELECT \(Self.columns) FROM sessions WHERE object_id = \(builder.bind(.text(sessionId)))"
        if !auth.isMaster {
            guard let userId = auth.userId else { throw ParseError.objectNotFound }
            sql += " AND user_id = \(builder.bind(.text(userId)))"
        }
        guard let session = RowJSON.object(.session, try await db.run(sql, builder.params), viewer: auth, keys: keys) else {
            throw ParseError.objectNotFound
        }
        return session
    }

    /// The session of a token as JSON (`GET /sessions/me`).
    public func get(token: String, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        let rows = try await db.run("SELECT \(Self.columns) FROM sessions WHERE token = $1", [.text(token)])
        guard let session = RowJSON.object(.session, rows, viewer: .master) else {
            throw ParseError.invalidSessionToken("Session token not found.")
        }
        return session
    }
}
