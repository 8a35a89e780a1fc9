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
    func insertSQL(userId: String, action: Action, installationId: String?, now: Int64, builder: inout SQLBuilder) -> (sql: String, info: SessionInfo) {
        let info = SessionInfo(sessionId: RandomID.objectID(), token: RandomID.sessionToken(), userId: userId,
                               expiresAt: now + lifetimeSeconds * 1000, installationId: installationId)
        let createdWith: JSONValue = ["action": .string(action.rawValue), "authProvider": "password"]
        let sql = """
            INSERT INTO sessions (object_id, token, user_id, created_with, installation_id, expires_at, created_at, updated_at)
            VALUES (\(builder.bind(.text(info.sessionId))), \(builder.bind(.text(info.token))), \(builder.bind(.text(userId))), \
            \(builder.bind(.json(createdWith.serialized()))), \(builder.bind(installationId.map(PostgresData.text) ?? .null)), \
            \(builder.bind(.timestamp(milliseconds: info.expiresAt))), \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
            """
        return (sql, info)
    }

    /// Creates a session. As Parse does, other sessions of the same user and installation are
    /// removed first (one session per device).
    public func create(userId: String, action: Action, installationId: String?, on db: any SQLExecutor) async throws(ParseError) -> SessionInfo {
        let now = UTCTime.nowMilliseconds()
        var builder = SQLBuilder()
        let (insert, info) = insertSQL(userId: userId, action: action, installationId: installationId, now: now, builder: &builder)
        if let installationId {
            let removed = try await db.run("DELETE FROM sessions WHERE user_id = $1 AND installation_id = $2 RETURNING token", [.text(userId), .text(installationId)])
            for row in removed {
                if let token = row["token"].string { try await events.publish(.sessionRevoked(token: token, userId: userId), on: db) }
            }
        }
        try await db.run(insert, builder.params)
        cache.put(info)
        return info
    }

    /// The valid session for `token`: 209 when unknown, revoked or expired.
    public func lookup(_ token: String, on db: any SQLExecutor) async throws(ParseError) -> SessionInfo {
        if let cached = cache.get(token) { return cached }
        guard Self.isWellFormed(token) else { throw ParseError.invalidSession }
        let rows = try await db.run("SELECT object_id, user_id, installation_id, expires_at FROM sessions WHERE token = $1", [.text(token)], readOnly: true)
        guard let row = rows.first, let sessionId = row["object_id"].string, let userId = row["user_id"].string,
              let expiresAt = row["expires_at"].timestampMilliseconds else {
            throw ParseError.invalidSession
        }
        guard expiresAt > UTCTime.nowMilliseconds() else { throw ParseError.expiredSession }
        let info = SessionInfo(sessionId: sessionId, token: token, userId: userId, expiresAt: expiresAt, installationId: row["installation_id"].string)
        cache.put(info)
        return info
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

    /// Sessions of one user (or of everyone for nil), newest first.
    public func list(userId: String?, limit: Int, skip: Int, on db: any SQLExecutor) async throws(ParseError) -> [JSONObject] {
        var builder = SQLBuilder()
        var sql = "SELECT \(Self.columns) FROM sessions"
        if let userId { sql += " WHERE user_id = \(builder.bind(.text(userId)))" }
        sql += " ORDER BY created_at DESC, object_id LIMIT \(builder.bind(.int(limit))) OFFSET \(builder.bind(.int(skip)))"
        return try await db.run(sql, builder.params).map(Self.json)
    }

    /// One session by objectId, if `auth` may see it (owner or master).
    public func get(sessionId: String, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        var builder = SQLBuilder()
        var sql = "SELECT \(Self.columns) FROM sessions WHERE object_id = \(builder.bind(.text(sessionId)))"
        if !auth.isMaster {
            guard let userId = auth.userId else { throw ParseError.objectNotFound }
            sql += " AND user_id = \(builder.bind(.text(userId)))"
        }
        guard let row = try await db.run(sql, builder.params).first else { throw ParseError.objectNotFound }
        return Self.json(row)
    }

    /// The session of a token as Parse renders `_Session`.
    public func get(token: String, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        guard let row = try await db.run("SELECT \(Self.columns) FROM sessions WHERE token = $1", [.text(token)]).first else {
            throw ParseError.invalidSessionToken("Session token not found.")
        }
        return Self.json(row)
    }

    /// A session row as `_Session` JSON.
    static func json(_ row: PostgresRow) -> JSONObject {
        var object = JSONObject()
        object["objectId"] = .string(row["object_id"].string ?? "")
        object["sessionToken"] = .string(row["token"].string ?? "")
        object["user"] = ParseValue.pointer(className: ClassName.user, objectId: row["user_id"].string ?? "")
        if let text = row["created_with"].json, let value = try? JSONParser().parse(text) { object["createdWith"] = value }
        if let installation = row["installation_id"].string { object["installationId"] = .string(installation) }
        object["restricted"] = .bool(row["restricted"].bool ?? false)
        if let expires = row["expires_at"].timestampMilliseconds { object["expiresAt"] = ParseValue.date(milliseconds: expires) }
        if let created = row["created_at"].timestampMilliseconds { object["createdAt"] = .string(UTCTime.iso8601(milliseconds: created)) }
        if let updated = row["updated_at"].timestampMilliseconds { object["updatedAt"] = .string(UTCTime.iso8601(milliseconds: updated)) }
        return object
    }
}
