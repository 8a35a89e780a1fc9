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
    /// Verifies `authData` entries (the server's providers).
    let authData: any AuthDataVerifier

    /// Members of a user body handled as typed columns.
    static let coreFields: Set<String> = ["username", "email", "password", "emailVerified"]
    /// Members clients may not write.
    static let reservedFields: Set<String> = ["sessionToken", "authData", "banned"]
    /// Longest username or email accepted, in bytes.
    public static let maxNameBytes = 256

    static let columns = "object_id, username, email, email_verified, acl, data, auth_data, created_at, updated_at"

    // MARK: Signup

    /// What a signup returns: the new user's id, creation time and first session; or, when its
    /// `authData` named an existing user, that user logged in.
    public struct SignUpResult: Sendable {
        public let objectId: String
        public let createdAt: Int64
        public let session: SessionInfo?
        /// The username Parley made up for an authData signup that sent none (Parse returns it).
        public let generatedUsername: String?
        /// The existing user of the signup's `authData` as it sees itself, with the new
        /// `sessionToken`: Parse answers 200 with it instead of 201.
        public let loggedIn: [UInt8]?
        /// The new user has an unverified email (`verifyUserEmails`): mail it a link.
        public let needsVerification: Bool

        /// Parse's signup response body: `{objectId, createdAt, username?, sessionToken}`.
        public var json: JSONObject {
            var object: JSONObject = ["objectId": .string(objectId), "createdAt": .string(UTCTime.iso8601(milliseconds: createdAt))]
            if let generatedUsername { object["username"] = .string(generatedUsername) }
            if let session { object["sessionToken"] = .string(session.token) }
            return object
        }
    }

    /// Length of a generated username (Parse's `randomString(25)`).
    static let generatedUsernameLength = 25

    /// Creates a user from a signup body and, unless `createSession` is false, its first session.
    /// Errors: 200/201 missing username/password, 125 bad email, 202/203 taken (case-insensitive),
    /// 105/111/123 for bad fields, 119 when a client sets `emailVerified`.
    ///
    /// With `authData` (docs/identity.md): every provider entry is verified first (252 unknown or
    /// disabled, 101 refused); when the ids belong to a user, that user is logged in (200 with
    /// its session; 208 when they belong to two users or to another user than the caller's);
    /// otherwise a user is created with them, username and password optional.
    public func signUp(body: JSONObject, auth: Auth, createSession: Bool = true, on db: any SQLExecutor) async throws(ParseError) -> SignUpResult {
        var body = body
        var change: AuthDataChange?
        if let value = body.removeValue(forKey: "authData") {
            let parsed = try AuthDataChange(value)
            if !parsed.links.isEmpty { change = parsed }
        }
        let plan = try WritePlan(body: body, isCreate: true, coreFields: Self.coreFields, reserved: Self.reservedFields)
        if var pending = change {
            try await pending.verify(with: authData)
            change = pending
            if let existing = try await logIn(authData: pending, auth: auth, on: db) { return existing }
        }
        var generatedUsername: String?
        let username: String
        if let value = plan.core["username"], !(change != nil && value.isNull) {
            guard let name = value.string, !name.isEmpty, name.utf8.count <= Self.maxNameBytes, !name.utf8.contains(0) else {
                throw ParseError.usernameMissing
            }
            username = name
        } else if change != nil {
            username = RandomID.alphanumeric(length: Self.generatedUsernameLength)
            generatedUsername = username
        } else {
            throw ParseError.usernameMissing
        }
        let password: String?
        if let value = plan.core["password"], !(change != nil && value.isNull) {
            guard let text = value.string, !text.isEmpty else { throw ParseError.passwordMissing }
            password = text
        } else if change != nil {
            password = nil
        } else {
            throw ParseError.passwordMissing
        }
        if let password { try configuration.passwordPolicy.validate(password, username: username) }
        let email = try Self.email(plan.core["email"])
        var emailVerified = try Self.emailVerified(plan.core["emailVerified"], auth: auth)
        // verifyUserEmails: a new email starts unverified (a verification mail follows), and
        // with preventLoginWithUnverifiedEmail the signup opens no session.
        if configuration.verifyUserEmails, email != nil, emailVerified == nil { emailVerified = false }
        let createSession = createSession && !(configuration.requiresVerifiedEmail && email != nil && emailVerified != true)
        try await schemas.resolve(className: ClassName.user, record: plan.fieldTypes, on: db)
        try await checkAvailable(username: username, email: email, excluding: nil, on: db)
        let mark = sessions.cache.mark()
        var hash: String?
        if let password { hash = try await hasher.hash(password, on: pool) }

        let now = UTCTime.nowMilliseconds()
        for attempt in 0..<3 {
            let objectId = RandomID.objectID()
            let acl: ACL? = plan.acl ?? ACL.userDefault(userId: objectId)
            var builder = SQLBuilder()
            let (readers, writers) = ACLSQL.permissions(acl)
            let geo = plan.geoPoint.map { ACLSQL.geo(latitude: $0.latitude, longitude: $0.longitude, builder: &builder) } ?? "NULL"
            var sql = """
                WITH u AS (
                    INSERT INTO users (object_id, username, email, password_hash, email_verified, acl, rperm, wperm, data, geo, auth_data, created_at, updated_at)
                    VALUES (\(builder.bind(.text(objectId))), \(builder.bind(.text(username))), \(builder.bind(email.map(PostgresData.text) ?? .null)), \
                    \(builder.bind(hash.map(PostgresData.text) ?? .null)), \(builder.bind(emailVerified.map(PostgresData.bool) ?? .null))::boolean, \
                    \(builder.bind(acl.map { .json(JSONValue.object($0.json).serialized()) } ?? .null))::jsonb, \(builder.bind(.textArray(readers))), \
                    \(builder.bind(.textArray(writers))), \(builder.bind(.json(JSONValue.object(plan.initialData()).serialized()))), \(geo), \
                    \(builder.bind(change.map { .json($0.linkJSON) } ?? .null))::jsonb, \
                    \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
                    RETURNING object_id
                )
                """
            var session: SessionInfo?
            if createSession {
                let info = SessionInfo(sessionId: RandomID.objectID(), token: RandomID.sessionToken(), userId: objectId,
                                       expiresAt: now + sessions.lifetimeSeconds * 1000, installationId: auth.installationId)
                let createdWith: JSONValue = ["action": "signup", "authProvider": .string(change?.providerNames ?? "password")]
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
                    if Self.isAuthDataViolation(error), let change {
                        // Another signup with the same provider id committed first: log in as
                        // that user (outside a transaction, which the failed statement ended).
                        if !(db is PostgresTransaction), let existing = try await logIn(authData: change, auth: auth, on: db) { return existing }
                        throw ParseError.authDataLinked
                    }
                    if let mapped = Self.uniqueViolation(error) { throw mapped }
                    if attempt < 2 { continue }
                }
                throw ParseError.database(error)
            }
            if let session {
                sessions.cache.put(session, since: mark)
                roles.noteNewUser(objectId)
            }
            return SignUpResult(objectId: objectId, createdAt: now, session: session, generatedUsername: generatedUsername, loggedIn: nil,
                                needsVerification: emailVerified == false)
        }
        throw ParseError.internalError("could not allocate a unique objectId")
    }

    /// The login half of an authData signup: nil when no user holds the (verified) ids; else
    /// that user with its provider data updated and a new session. 208 when the ids belong to
    /// two users, or to another user than the caller's session.
    private func logIn(authData change: AuthDataChange, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> SignUpResult? {
        // Before the read of `banned`: a ban published meanwhile keeps the new session uncached.
        let mark = sessions.cache.mark()
        var builder = SQLBuilder()
        let pairs = change.links.map { "(\(builder.bind(.text($0.provider))), \(builder.bind(.text($0.id))))" }.joined(separator: ", ")
        let found = try await db.run("""
            SELECT object_id, banned FROM users
            WHERE object_id IN (SELECT user_id FROM user_auth_ids WHERE (provider, provider_id) IN (\(pairs))) LIMIT 2
            """, builder.params)
        guard let first = found.first, let userId = first["object_id"].string else { return nil }
        guard found.count == 1 else { throw ParseError.authDataLinked }
        if let caller = auth.userId, caller != userId { throw ParseError.authDataLinked }
        guard first["banned"].bool != true else { throw ParseError.invalidLogin }
        let merged = "COALESCE(auth_data, '{}'::jsonb) || $2::jsonb"
        var rows = try await db.run("""
            UPDATE users SET auth_data = \(merged) WHERE object_id = $1 AND auth_data IS DISTINCT FROM \(merged) RETURNING \(Self.columns)
            """, [.text(userId), .json(change.linkJSON)]) { Self.isAuthDataViolation($0) ? ParseError.authDataLinked : nil }
        if rows.isEmpty {
            rows = try await db.run("SELECT \(Self.columns) FROM users WHERE object_id = $1", [.text(userId)])
        } else {
            cache.invalidate(userId)
        }
        guard let row = rows.first else { throw ParseError.invalidLogin }
        let session = try await sessions.create(userId: userId, action: .login, authProvider: change.providerNames,
                                                installationId: auth.installationId, since: mark, on: db)
        let user = Self.sessionUser(rows, row: row, session: session).adding(sessionToken: session.token)
        return SignUpResult(objectId: userId, createdAt: row["created_at"].timestampMilliseconds ?? 0, session: session,
                            generatedUsername: nil, loggedIn: user, needsVerification: false)
    }

    // MARK: Login

    /// Checks credentials and opens a session. Any mismatch (unknown user, wrong password, banned,
    /// no password set) is 101 "Invalid username/password." after the same argon2id work.
    /// Answers the user as it sees itself, with its new `sessionToken`.
    /// `beforeSession`, when given, runs with the user's objectId once the password is verified
    /// and before the session is created (Cloud Code's beforeLogin): its error fails the login.
    public func logIn(username: String?, email: String?, password: String?, installationId: String?,
                      beforeSession: (@Sendable (String) async throws(ParseError) -> Void)? = nil, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
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
        if configuration.requiresVerifiedEmail, !row["email"].isNull, row["email_verified"].bool != true {
            throw ParseError.emailNotFound("User email is not verified.")
        }
        if configuration.passwordPolicy.isExpired(changedAt: row["password_changed_at"].timestampMilliseconds, now: UTCTime.nowMilliseconds()) {
            throw PasswordPolicy.expired
        }

        if let beforeSession { try await beforeSession(userId) }
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
    /// `pointerFields`: the class-level pointer permissions, one of which must name the reader.
    public func get(objectId: String, auth: Auth, hidden: [String] = [], userFields: [ClassAccess.UserFieldProtection] = [], pointerFields: [String] = [],
                    keys: [String]? = nil, relations: [SchemaStore.RelationField] = [], on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        var builder = SQLBuilder()
        let sql = "SELECT \(Self.columns) FROM users WHERE object_id = \(builder.bind(.text(objectId)))" + ACLSQL.filter("rperm", auth: auth, builder: &builder)
            + ACLSQL.pointerFilter(pointerFields, auth: auth, builder: &builder)
        guard let user = RowJSON.object(.user, try await db.run(sql, builder.params, readOnly: true), viewer: auth, keys: keys, relations: relations,
                                        hidden: hidden, userFields: userFields) else {
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
    public func update(objectId: String, body: JSONObject, auth: Auth, pointerFields: [String] = [], on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        guard auth.canModifyUser(objectId) else { throw ParseError.sessionMissing("Cannot modify user \(objectId).") }
        var body = body
        var change: AuthDataChange?
        if let value = body.removeValue(forKey: "authData") {
            let parsed = try AuthDataChange(value)
            if !parsed.isEmpty { change = parsed }
        }
        let plan = try WritePlan(body: body, isCreate: false, coreFields: Self.coreFields, reserved: Self.reservedFields)
        var builder = SQLBuilder()
        var assignments: [String] = []
        var guards = ""
        if var pending = change {
            try await pending.verify(with: authData)
            change = pending
            assignments.append(try await linkAssignment(pending, objectId: objectId, setsPassword: plan.core["password"] != nil,
                                                        auth: auth, builder: &builder, guards: &guards, on: db))
        }
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
            // verifyUserEmails: a changed email is unverified until its link is followed.
            if configuration.verifyUserEmails, parsed != nil, plan.core["emailVerified"] == nil {
                assignments.append("email_verified = CASE WHEN email IS NOT DISTINCT FROM \(builder.bind(parsed.map(PostgresData.text) ?? .null)) THEN email_verified ELSE false END")
            }
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
        let sql = "UPDATE users SET \(assignments.joined(separator: ", ")) WHERE object_id = \(builder.bind(.text(objectId)))\(guards)"
            + ACLSQL.filter("wperm", auth: auth, builder: &builder) + ACLSQL.pointerFilter(pointerFields, auth: auth, builder: &builder) + " RETURNING data"
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

    /// The `auth_data = …` assignment of an update that links and unlinks providers (already
    /// verified). 208 when a provider id belongs to another user; 142 when a client would unlink
    /// the user's last way to log in (no password and no provider left). `guards` gets the same
    /// rule as a condition of the UPDATE, for a concurrent change.
    private func linkAssignment(_ change: AuthDataChange, objectId: String, setsPassword: Bool, auth: Auth,
                                builder: inout SQLBuilder, guards: inout String, on db: any SQLExecutor) async throws(ParseError) -> String {
        if !change.links.isEmpty {
            var lookup = SQLBuilder()
            let pairs = change.links.map { "(\(lookup.bind(.text($0.provider))), \(lookup.bind(.text($0.id))))" }.joined(separator: ", ")
            let taken = try await db.run("""
                SELECT 1 FROM user_auth_ids WHERE (provider, provider_id) IN (\(pairs)) AND user_id <> \(lookup.bind(.text(objectId))) LIMIT 1
                """, lookup.params)
            if !taken.isEmpty { throw ParseError.authDataLinked }
        }
        let next = "NULLIF((COALESCE(auth_data, '{}'::jsonb) - \(builder.bind(.textArray(change.unlinks)))::text[]) || \(builder.bind(.json(change.linkJSON)))::jsonb, '{}'::jsonb)"
        if !change.unlinks.isEmpty && !setsPassword && !auth.isMaster {
            var check = SQLBuilder()
            let rows = try await db.run("""
                SELECT password_hash IS NOT NULL OR NULLIF((COALESCE(auth_data, '{}'::jsonb) - \(check.bind(.textArray(change.unlinks)))::text[]) \
                || \(check.bind(.json(change.linkJSON)))::jsonb, '{}'::jsonb) IS NOT NULL AS can_log_in FROM users WHERE object_id = \(check.bind(.text(objectId)))
                """, check.params)
            if rows.first?["can_log_in"].bool == false { throw Self.lastLoginMethod }
            guards = " AND (password_hash IS NOT NULL OR \(next) IS NOT NULL)"
        }
        return "auth_data = \(next)"
    }

    /// A client may not unlink the last provider of a user without a password (it could never
    /// log in again).
    static let lastLoginMethod = ParseError.validationFailed("Cannot unlink the last way to log in: set a password or link another provider first.")

    /// Deletes a user (its sessions go with it). Only the user or master: 206 otherwise.
    public func delete(objectId: String, auth: Auth, pointerFields: [String] = [], on db: any SQLExecutor) async throws(ParseError) {
        if !auth.isMaster {
            guard auth.userId != nil else { throw ParseError.sessionMissing("Insufficient auth to delete user") }
            guard auth.userId == objectId else { throw ParseError.sessionMissing("Insufficient auth.") }
        }
        var builder = SQLBuilder()
        let sql = "DELETE FROM users WHERE object_id = \(builder.bind(.text(objectId)))" + ACLSQL.filter("wperm", auth: auth, builder: &builder)
            + ACLSQL.pointerFilter(pointerFields, auth: auth, builder: &builder) + " RETURNING object_id"
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

    /// Whether `error` is a provider id already held by another user (`user_auth_ids`).
    static func isAuthDataViolation(_ error: PostgresError) -> Bool {
        guard case .server(let server) = error, server.sqlState == "23505" else { return false }
        return server.constraint == "user_auth_ids_pkey"
    }

    static func uniqueViolation(_ error: PostgresError) -> ParseError? {
        guard case .server(let server) = error, server.sqlState == "23505" else { return nil }
        switch server.constraint {
        case "users_username_lower": return ParseError.usernameTaken
        case "users_email_lower": return ParseError.emailTaken
        case "user_auth_ids_pkey": return ParseError.authDataLinked
        default: return nil
        }
    }
}
