import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// `_User`: signup, login, reads, updates and deletes, with Parse's rules and error codes.
public struct UserStore: Sendable {
    let schemas: SchemaStore
    let sessions: SessionStore
    let hasher: PasswordHasher
    let pool: BlockingPool
    let configuration: AccountsConfiguration
    /// Users as they see themselves, for `me` (invalidated by every write below).
    public let cache: UserCache
    /// Told that a signed-up user holds no role yet, so its first requests can be answered inline.
    let roles: RoleStore

    /// Members of a user body handled as typed columns.
    static let coreFields: Set<String> = ["username", "email", "password", "emailVerified"]
    /// Members clients may not write.
    static let reservedFields: Set<String> = ["sessionToken", "authData", "banned"]
    /// Longest username or email accepted, in bytes.
    public static let maxNameBytes = 256

    static let columns = "object_id, username, email, email_verified, acl, data, created_at, updated_at"

    // MARK: Signup

    /// What a signup returns: the new user's id, creation time and first session.
    public struct SignUpResult: Sendable {
        public let objectId: String
        public let createdAt: Int64
        public let session: SessionInfo?

        /// Parse's signup response body: `{objectId, createdAt, sessionToken}`.
        public var json: JSONObject {
            var object: JSONObject = ["objectId": .string(objectId), "createdAt": .string(UTCTime.iso8601(milliseconds: createdAt))]
            if let session { object["sessionToken"] = .string(session.token) }
            return object
        }
    }

    /// Creates a user from a signup body and, unless `createSession` is false, its first session.
    /// Errors: 200/201 missing username/password, 125 bad email, 202/203 taken (case-insensitive),
    /// 105/111/123 for bad fields, 119 when a client sets `emailVerified`.
    public func signUp(body: JSONObject, auth: Auth, createSession: Bool = true, on db: any SQLExecutor) async throws(ParseError) -> SignUpResult {
        let plan = try WritePlan(body: body, isCreate: true, coreFields: Self.coreFields, reserved: Self.reservedFields)
        guard let username = plan.core["username"]?.string, !username.isEmpty, username.utf8.count <= Self.maxNameBytes, !username.utf8.contains(0) else {
            throw ParseError.usernameMissing
        }
        guard let password = plan.core["password"]?.string, !password.isEmpty else { throw ParseError.passwordMissing }
        try configuration.passwordPolicy.validate(password, username: username)
        let email = try Self.email(plan.core["email"])
        let emailVerified = try Self.emailVerified(plan.core["emailVerified"], auth: auth)
        try await schemas.resolve(className: ClassName.user, record: plan.fieldTypes, on: db)
        try await checkAvailable(username: username, email: email, excluding: nil, on: db)
        let mark = sessions.cache.mark()
        let hash = try await hasher.hash(password, on: pool)

        let now = UTCTime.nowMilliseconds()
        for attempt in 0..<3 {
            let objectId = RandomID.objectID()
            let acl: ACL? = plan.acl ?? ACL.userDefault(userId: objectId)
            var builder = SQLBuilder()
            let (readers, writers) = ACLSQL.permissions(acl)
            let geo = plan.geoPoint.map { ACLSQL.geo(latitude: $0.latitude, longitude: $0.longitude, builder: &builder) } ?? "NULL"
            var sql = """
                WITH u AS (
                    INSERT INTO users (object_id, username, email, password_hash, email_verified, acl, rperm, wperm, data, geo, created_at, updated_at)
                    VALUES (\(builder.bind(.text(objectId))), \(builder.bind(.text(username))), \(builder.bind(email.map(PostgresData.text) ?? .null)), \
                    \(builder.bind(.text(hash))), \(builder.bind(emailVerified.map(PostgresData.bool) ?? .null))::boolean, \
                    \(builder.bind(acl.map { .json(JSONValue.object($0.json).serialized()) } ?? .null))::jsonb, \(builder.bind(.textArray(readers))), \
                    \(builder.bind(.textArray(writers))), \(builder.bind(.json(JSONValue.object(plan.initialData()).serialized()))), \(geo), \
                    \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
                    RETURNING object_id
                )
                """
            var session: SessionInfo?
            if createSession {
                let info = SessionInfo(sessionId: RandomID.objectID(), token: RandomID.sessionToken(), userId: objectId,
                                       expiresAt: now + sessions.lifetimeSeconds * 1000, installationId: auth.installationId)
                let createdWith: JSONValue = ["action": "signup", "authProvider": "password"]
                sql += """
                    
                    INSERT INTO sessions (object_id, token, user_id, created_with, installation_id, expires_at, created_at, updated_at)
                    SELECT \(builder.bind(.text(info.sessionId))), \(builder.bind(.text(info.token))), u.object_id, \
                    \(builder.bind(.json(createdWith.serialized()))), \(builder.bind(info.installationId.map(PostgresData.text) ?? .null)), \
                    \(builder.bind(.timestamp(milliseconds: info.expiresAt))), \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))) FROM u
                    """
                session = info
            } else {
                sql += "\nSELECT object_id FROM u"
            }
            do {
                _ = try await db.query(sql, builder.params)
            } catch {
                if error.isUniqueViolation {
                    if let mapped = Self.uniqueViolation(error) { throw mapped }
                    if attempt < 2 { continue }
                }
                throw ParseError.database(error)
            }
            if let session {
                sessions.cache.put(session, since: mark)
                roles.noteNewUser(objectId)
            }
            return SignUpResult(objectId: objectId, createdAt: now, session: session)
        }
        throw ParseError.internalError("could not allocate a unique objectId")
    }

    // MARK: Login

    /// Checks credentials and opens a session. Any mismatch (unknown user, wrong password, banned,
    /// no password set) is 101 "Invalid username/password." after the same argon2id work.
    /// Answers the user as it sees itself, with its new `sessionToken`.
    public func logIn(username: String?, email: String?, password: String?, installationId: String?, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        let username = username.flatMap { $0.isEmpty ? nil : $0 }
        let email = email.flatMap { $0.isEmpty ? nil : $0 }
        guard username != nil || email != nil else { throw ParseError.usernameMissing("username/email is required.") }
        guard let password, !password.isEmpty else { throw ParseError.passwordMissing("password is required.") }

        var builder = SQLBuilder()
        let condition: String
        switch (username, email) {
        case (let u?, let e?):
            let pu = builder.bind(.text(u)), pe = builder.bind(.text(e))
            condition = "lower(username) = lower(\(pu)) AND username = \(pu) AND lower(email) = lower(\(pe)) AND email = \(pe)"
        case (nil, let e?):
            let pe = builder.bind(.text(e))
            condition = "lower(email) = lower(\(pe)) AND email = \(pe)"
        case (let u?, nil):
            let pu = builder.bind(.text(u))
            condition = "(lower(username) = lower(\(pu)) AND username = \(pu)) OR (lower(email) = lower(\(pu)) AND email = \(pu))"
        default:
            throw ParseError.usernameMissing("username/email is required.")
        }
        // Before the read of `banned`: a ban published meanwhile keeps the new session uncached.
        let mark = sessions.cache.mark()
        let rows = try await db.run("""
            SELECT \(Self.columns), password_hash, banned, failed_logins, locked_until, password_changed_at FROM users WHERE \(condition) LIMIT 2
            """, builder.params)
        let row = rows.count > 1 ? rows.first { $0["username"].string == username } ?? rows.first : rows.first
        let valid = try await hasher.verify(password, hash: row?["password_hash"].string, on: pool)
        guard let row, let userId = row["object_id"].string else { throw ParseError.invalidLogin }

        if let threshold = configuration.lockoutThreshold {
            let now = UTCTime.nowMilliseconds()
            if let lockedUntil = row["locked_until"].timestampMilliseconds, lockedUntil > now, (row["failed_logins"].int ?? 0) >= threshold {
                throw lockedError
            }
            if !valid {
                let count = try await recordFailedLogin(userId: userId, threshold: threshold, on: db)
                if count > threshold { throw lockedError }
                throw ParseError.invalidLogin
            }
            if (row["failed_logins"].int ?? 0) != 0 {
                try await db.run("UPDATE users SET failed_logins = 0, locked_until = NULL WHERE object_id = $1", [.text(userId)])
            }
        }
        guard valid, row["banned"].bool != true else { throw ParseError.invalidLogin }
        if configuration.passwordPolicy.isExpired(changedAt: row["password_changed_at"].timestampMilliseconds, now: UTCTime.nowMilliseconds()) {
            throw PasswordPolicy.expired
        }

        let session = try await sessions.create(userId: userId, action: .login, installationId: installationId, since: mark, on: db)
        return Self.sessionUser(rows, row: row, session: session).adding(sessionToken: session.token)
    }

    private var lockedError: ParseError {
        .objectNotFound("Your account is locked due to multiple failed login attempts. Please try again after \(configuration.lockoutMinutes) minute(s)")
    }

    /// Counts a failed login atomically; a lockout that has expired starts a fresh count.
    private func recordFailedLogin(userId: String, threshold: Int, on db: any SQLExecutor) async throws(ParseError) -> Int {
        let fresh = "(locked_until IS NOT NULL AND locked_until < now())"
        let next = "(CASE WHEN \(fresh) THEN 1 ELSE failed_logins + 1 END)"
        let rows = try await db.run("""
            UPDATE users SET failed_logins = \(next),
                locked_until = CASE WHEN \(next) >= $2 THEN now() + make_interval(mins => $3::int)
                                    WHEN \(fresh) THEN NULL ELSE locked_until END
            WHERE object_id = $1 RETURNING failed_logins
            """, [.text(userId), .int(threshold), .int(configuration.lockoutMinutes)])
        return rows.first?["failed_logins"].int ?? 0
    }

    // MARK: Reads

    /// The user of a session as it sees itself, with `sessionToken` (GET /users/me), from the
    /// cache when it has the user. 209 if the user is gone.
    public func me(session: SessionInfo, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        if let bytes = cache.serialized(session.userId, sessionToken: session.token) { return bytes }
        let rows = try await db.run("SELECT \(Self.columns) FROM users WHERE object_id = $1", [.text(session.userId)], readOnly: true)
        guard let row = rows.first else { throw ParseError.invalidSession }
        let user = Self.sessionUser(rows, row: row, session: session)
        if !(db is PostgresTransaction) { cache.put(session.userId, user) }
        return user.adding(sessionToken: session.token)
    }

    /// A user row (the first of `rows`) as the session's own user sees it.
    private static func sessionUser(_ rows: PostgresRows, row: PostgresRow, session: SessionInfo) -> SessionUserJSON {
        var bytes: [UInt8] = []
        RowJSON(.user, columns: rows.columns, viewer: Auth(isMaster: false, user: session, installationId: nil)).write(row, into: &bytes)
        return SessionUserJSON(user: bytes)
    }

    /// One user as JSON, if readable by `auth`, without the `hidden` (protected) fields unless it is the reader; 101 otherwise.
    public func get(objectId: String, auth: Auth, hidden: [String] = [], keys: [String]? = nil, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        var builder = SQLBuilder()
        let sql = "SELECT \(Self.columns) FROM users WHERE object_id = \(builder.bind(.text(objectId)))" + ACLSQL.filter("rperm", auth: auth, builder: &builder)
        guard let user = RowJSON.object(.user, try await db.run(sql, builder.params, readOnly: true), viewer: auth, keys: keys, hidden: hidden) else {
            throw ParseError.objectNotFound
        }
        return user
    }

    /// Whether a user with this objectId exists (banned or not).
    public func exists(objectId: String, on db: any SQLExecutor) async throws(ParseError) -> Bool {
        !(try await db.run("SELECT 1 FROM users WHERE object_id = $1", [.text(objectId)], readOnly: true)).isEmpty
    }

    /// The objectId of a user named by objectId or username (admin tools).
    public func resolve(_ idOrUsername: String, on db: any SQLExecutor) async throws(ParseError) -> String {
        let rows = try await db.run("""
            SELECT object_id FROM users WHERE object_id = $1 UNION ALL
            SELECT object_id FROM users WHERE lower(username) = lower($1::text) LIMIT 1
            """, [.text(idOrUsername)])
        guard let id = rows.first?["object_id"].string else { throw ParseError.objectNotFound("no user with id or username \(idOrUsername)") }
        return id
    }

    // MARK: Update and delete

    /// Applies an update body (PUT /users/:id). Only the user or master: 206 otherwise. Changing
    /// the password revokes the user's other sessions. Returns `{updatedAt}` plus the new values
    /// of fields changed by operations.
    public func update(objectId: String, body: JSONObject, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        guard auth.canModifyUser(objectId) else { throw ParseError.sessionMissing("Cannot modify user \(objectId).") }
        let plan = try WritePlan(body: body, isCreate: false, coreFields: Self.coreFields, reserved: Self.reservedFields)
        var builder = SQLBuilder()
        var assignments: [String] = []
        var username: String?
        if let value = plan.core["username"] {
            guard let name = value.string, !name.isEmpty, name.utf8.count <= Self.maxNameBytes, !name.utf8.contains(0) else { throw ParseError.usernameMissing }
            username = name
            assignments.append("username = \(builder.bind(.text(name)))")
        }
        var email: String??
        if let value = plan.core["email"] {
            let parsed = try Self.email(value)
            email = .some(parsed)
            assignments.append("email = \(builder.bind(parsed.map(PostgresData.text) ?? .null))")
        }
        if let value = plan.core["emailVerified"] {
            let verified = try Self.emailVerified(value, auth: auth)
            assignments.append("email_verified = \(builder.bind(verified.map(PostgresData.bool) ?? .null))::boolean")
        }
        var passwordChanged = false
        if let value = plan.core["password"] {
            guard let password = value.string, !password.isEmpty else { throw ParseError.passwordMissing }
            try await checkPolicy(password, userId: objectId, username: username, on: db)
            let hash = try await hasher.hash(password, on: pool)
            assignments.append("password_hash = \(builder.bind(.text(hash)))")
            passwordChanged = true
        }
        let types = try await schemas.resolve(className: ClassName.user, record: plan.fieldTypes, lookup: plan.clearedFields, on: db)
        if username != nil || email != nil {
            try await checkAvailable(username: username, email: email ?? nil, excluding: objectId, on: db)
        }
        if case .some(let acl) = plan.acl {
            assignments.append(ACLSQL.assignments(acl, public: (["*"], ["*"]), builder: &builder))
        }
        let now = UTCTime.nowMilliseconds()
        assignments += plan.updateAssignments(types: types, now: now, builder: &builder)
        let sql = "UPDATE users SET \(assignments.joined(separator: ", ")) WHERE object_id = \(builder.bind(.text(objectId)))"
            + ACLSQL.filter("wperm", auth: auth, builder: &builder) + " RETURNING data"
        let rows = try await db.run(sql, builder.params) { Self.uniqueViolation($0) }
        cache.invalidate(objectId)
        guard let row = rows.first else {
            throw auth.isMaster ? ParseError.objectNotFound : ParseError.sessionMissing("Insufficient auth.")
        }
        if passwordChanged {
            let keep = auth.userId == objectId ? auth.user?.sessionId : nil
            try await sessions.revokeAll(userId: objectId, keeping: keep, reason: .passwordChanged, on: db)
            if let current = auth.user, current.userId == objectId { sessions.cache.put(current, since: sessions.cache.mark()) }
        } else {
            try await sessions.events.publish(.userChanged(userId: objectId), on: db)
        }
        return plan.updateResponse(row, now: now)
    }

    /// Deletes a user (its sessions go with it). Only the user or master: 206 otherwise.
    public func delete(objectId: String, auth: Auth, on db: any SQLExecutor) async throws(ParseError) {
        if !auth.isMaster {
            guard auth.userId != nil else { throw ParseError.sessionMissing("Insufficient auth to delete user") }
            guard auth.userId == objectId else { throw ParseError.sessionMissing("Insufficient auth.") }
        }
        var builder = SQLBuilder()
        let sql = "DELETE FROM users WHERE object_id = \(builder.bind(.text(objectId)))" + ACLSQL.filter("wperm", auth: auth, builder: &builder) + " RETURNING object_id"
        let rows = try await db.run(sql, builder.params)
        guard !rows.isEmpty else { throw auth.isMaster ? ParseError.objectNotFound : ParseError.sessionMissing("Insufficient auth.") }
        try await sessions.events.publish(.sessionsRevoked(userId: objectId, reason: .deleted, keeping: nil), on: db)
    }

    /// Bans or unbans a user; a ban revokes every session. Returns the sessions revoked.
    @discardableResult
    public func setBanned(objectId: String, banned: Bool, on db: any SQLExecutor) async throws(ParseError) -> Int {
        let rows = try await db.run("UPDATE users SET banned = $2, updated_at = now() WHERE object_id = $1 RETURNING object_id", [.text(objectId), .bool(banned)])
        cache.invalidate(objectId)
        guard !rows.isEmpty else { throw ParseError.objectNotFound }
        guard banned else {
            try await sessions.events.publish(.userChanged(userId: objectId), on: db)
            return 0
        }
        return try await sessions.revokeAll(userId: objectId, reason: .banned, on: db)
    }

    /// Sets a new password (admin) and revokes every session of the user.
    public func resetPassword(objectId: String, password: String, on db: any SQLExecutor) async throws(ParseError) {
        guard !password.isEmpty else { throw ParseError.passwordMissing }
        try await checkPolicy(password, userId: objectId, username: nil, on: db)
        let hash = try await hasher.hash(password, on: pool)
        let rows = try await db.run("""
            UPDATE users SET password_hash = $2, failed_logins = 0, locked_until = NULL, updated_at = now() WHERE object_id = $1 RETURNING object_id
            """, [.text(objectId), .text(hash)])
        cache.invalidate(objectId)
        guard !rows.isEmpty else { throw ParseError.objectNotFound }
        try await sessions.revokeAll(userId: objectId, reason: .passwordReset, on: db)
    }

    // MARK: Helpers

    /// The password policy for a new password of an existing user: pattern, username (the one
    /// being set, else the stored one), history. Before any hashing.
    func checkPolicy(_ password: String, userId: String, username: String?, on db: any SQLExecutor) async throws(ParseError) {
        let policy = configuration.passwordPolicy
        guard policy.checksNewPasswords else { return }
        var name = username
        if name == nil && policy.doNotAllowUsername {
            name = try await db.run("SELECT username FROM users WHERE object_id = $1", [.text(userId)]).first?["username"].string
        }
        try policy.validate(password, username: name)
        try await policy.checkHistory(password, userId: userId, hasher: hasher, pool: pool, on: db)
    }

    static func email(_ value: JSONValue?) throws(ParseError) -> String? {
        guard let value, !value.isNull else { return nil }
        guard let email = value.string, email.utf8.count <= maxNameBytes, !email.utf8.contains(0) else { throw ParseError.invalidEmail }
        // Parse's rule: something, an @, something.
        guard let at = email.firstIndex(of: "@"), at != email.startIndex, email.index(after: at) != email.endIndex else {
            throw ParseError.invalidEmail
        }
        return email
    }

    static func emailVerified(_ value: JSONValue?, auth: Auth) throws(ParseError) -> Bool? {
        guard let value, !value.isNull else { return nil }
        guard auth.isMaster else { throw ParseError.operationForbidden("Clients aren't allowed to manually update email verification.") }
        guard let flag = value.bool else { throw ParseError.incorrectType("emailVerified must be a boolean") }
        return flag
    }

    /// 202/203 before any hashing work when the name or email is visibly taken.
    private func checkAvailable(username: String?, email: String?, excluding: String?, on db: any SQLExecutor) async throws(ParseError) {
        let rows = try await db.run("""
            SELECT lower(username) = lower($1::text) AS name_taken, lower(email) = lower($2::text) AS email_taken FROM users
            WHERE (lower(username) = lower($1::text) OR lower(email) = lower($2::text)) AND object_id IS DISTINCT FROM $3 LIMIT 2
            """, [username.map(PostgresData.text) ?? .null, email.map(PostgresData.text) ?? .null, excluding.map(PostgresData.text) ?? .null])
        if rows.contains(where: { $0["name_taken"].bool == true }) { throw ParseError.usernameTaken }
        if rows.contains(where: { $0["email_taken"].bool == true }) { throw ParseError.emailTaken }
    }

    static func uniqueViolation(_ error: PostgresError) -> ParseError? {
        guard case .server(let server) = error, server.sqlState == "23505" else { return nil }
        switch server.constraint {
        case "users_username_lower": return ParseError.usernameTaken
        case "users_email_lower": return ParseError.emailTaken
        default: return nil
        }
    }
}
