import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// Email verification and password reset (Parse's `verifyUserEmails` and
/// `requestPasswordReset`): single-use tokens in `user_tokens` (stored as SHA-256 hashes), each
/// queued with its mail in one transaction, throttled per user, consumed by the account pages.
public struct AccountEmails: Sendable {
    let database: PostgresClient
    let users: UserStore
    let sessions: SessionStore
    let mailer: any AccountMailer
    let configuration: AccountsConfiguration
    let logger: Logger

    /// Bytes of randomness in a mailed token (hex in the link).
    static let tokenBytes = 24
    /// Longest token accepted from a link or form, in bytes.
    public static let maxTokenBytes = 128

    /// What a reset link resolves to.
    public struct ResetTarget: Sendable {
        public let userId: String
        public let username: String
    }

    // MARK: Sending

    /// Mails a verification link to the user's current email if it is unverified (signup, email
    /// change). `pagesURL` is `<public URL><mount>/apps/<app id>`.
    public func sendVerification(userId: String, pagesURL: String) async throws(ParseError) {
        guard configuration.verifyUserEmails else { return }
        let rows = try await database.run("SELECT username, email, email_verified FROM users WHERE object_id = $1", [.text(userId)])
        guard let row = rows.first, let email = row["email"].string, row["email_verified"].bool != true else { return }
        try await issue(.verifyEmail, userId: userId, email: email, username: row["username"].string ?? "", pagesURL: pagesURL)
    }

    /// `POST /verificationEmailRequest`: 204 without an email, 125 when it is not a string, 205
    /// when no user has it, -1 when it is verified already (Parse Server's answers).
    public func requestVerification(email value: JSONValue?, pagesURL: String) async throws(ParseError) {
        let email = try Self.requestedEmail(value)
        let rows = try await database.run("""
            SELECT object_id, username, email, email_verified FROM users WHERE lower(email) = lower($1) AND email = $1 LIMIT 1
            """, [.text(email)])
        guard let row = rows.first, let userId = row["object_id"].string else { throw ParseError.emailNotFound("No user found with email \(email)") }
        if row["email_verified"].bool == true { throw ParseError.otherCause("Email \(email) is already verified.") }
        try await issue(.verifyEmail, userId: userId, email: email, username: row["username"].string ?? "", pagesURL: pagesURL)
    }

    /// `POST /requestPasswordReset`: `{}` whether or not a user has the email (no enumeration);
    /// 204 without an email, 125 when it is not a string.
    public func requestPasswordReset(email value: JSONValue?, pagesURL: String) async throws(ParseError) {
        let email = try Self.requestedEmail(value)
        let rows = try await database.run("""
            SELECT object_id, username FROM users WHERE lower(email) = lower($1) AND email = $1 AND NOT banned LIMIT 1
            """, [.text(email)])
        guard let row = rows.first, let userId = row["object_id"].string else { return }
        try await issue(.passwordReset, userId: userId, email: email, username: row["username"].string ?? "", pagesURL: pagesURL)
    }

    /// Creates a token and queues its mail in one transaction, unless the user had
    /// `accountMailsPerHour` mails of this kind in the last hour. Earlier links of the kind stop
    /// working, except reset links with `resetTokenReuseIfValid`, which keep working until they
    /// expire or one is used.
    private func issue(_ kind: AccountMailKind, userId: String, email: String, username: String, pagesURL: String) async throws(ParseError) {
        let token = RandomID.hex(Sodium.randomBytes(Self.tokenBytes))
        let path = kind == .verifyEmail ? "verify_email" : "request_password_reset"
        let link = "\(pagesURL)/\(path)?token=\(token)"
        guard let mail = mailer.enqueueStatement(kind, to: email, username: username, link: link) else {
            logger.warning("account mail not sent: the address cannot take mail", [("kind", kind.rawValue), ("user", userId)])
            return
        }
        let validity = kind == .verifyEmail ? configuration.emailVerifyTokenValidity : configuration.passwordPolicy.resetTokenValidityDuration
        let keepsOlder = kind == .passwordReset && configuration.passwordPolicy.resetTokenReuseIfValid
        let limit = configuration.accountMailsPerHour
        let sent: Bool
        do {
            sent = try await database.transaction { tx -> Bool in
                // One request per user at a time: the count below cannot be raced.
                _ = try await tx.query("SELECT 1 FROM users WHERE object_id = $1 FOR UPDATE", [.text(userId)])
                let recent = try await tx.query("""
                    SELECT count(*) AS n FROM user_tokens WHERE user_id = $1 AND kind = $2 AND created_at > now() - interval '1 hour'
                    """, [.text(userId), .text(kind.rawValue)])
                guard (recent.first?["n"].int ?? 0) < limit else { return false }
                _ = try await tx.query("DELETE FROM user_tokens WHERE user_id = $1 AND kind = $2 AND created_at < now() - interval '1 day'",
                                       [.text(userId), .text(kind.rawValue)])
                if !keepsOlder {
                    _ = try await tx.query("""
                        UPDATE user_tokens SET expires_at = now() WHERE user_id = $1 AND kind = $2 AND (expires_at IS NULL OR expires_at > now())
                        """, [.text(userId), .text(kind.rawValue)])
                }
                _ = try await tx.query("""
                    INSERT INTO user_tokens (token_hash, user_id, kind, email, expires_at)
                    VALUES (sha256(convert_to($1, 'UTF8')), $2, $3, $4, now() + make_interval(secs => $5::double precision))
                    """, [.text(token), .text(userId), .text(kind.rawValue), .text(email),
                          validity.map { .double(Double($0.wholeMilliseconds) / 1000) } ?? .null])
                _ = try await tx.query(mail.sql, mail.params)
                return true
            }
        } catch let error as PostgresError {
            throw ParseError.database(error)
        } catch {
            throw ParseError.internalError("\(error)")
        }
        if sent {
            mailer.queued()
        } else {
            logger.notice("account mail throttled", [("kind", kind.rawValue), ("user", userId)])
        }
    }

    // MARK: Consuming

    /// Marks the email of a verification link verified and spends the link. Nil for an unknown,
    /// used or expired link, or one sent to an email the user no longer has; else the username.
    public func verifyEmail(token: String) async throws(ParseError) -> String? {
        guard Self.isPlausible(token) else { return nil }
        let spent = try await database.run("""
            DELETE FROM user_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND kind = 'verify_email'
            RETURNING user_id, email, (expires_at IS NULL OR expires_at > now()) AS live
            """, [.text(token)])
        guard let row = spent.first, row["live"].bool == true, let userId = row["user_id"].string, let email = row["email"].string else { return nil }
        let rows = try await database.run("""
            UPDATE users SET email_verified = true, updated_at = now() WHERE object_id = $1 AND email = $2 RETURNING username
            """, [.text(userId), .text(email)])
        guard let username = rows.first?["username"].string else { return nil }
        _ = try await database.run("DELETE FROM user_tokens WHERE user_id = $1 AND kind = 'verify_email'", [.text(userId)])
        users.cache.invalidate(userId)
        try await sessions.events.publish(.userChanged(userId: userId), on: database)
        return username
    }

    /// The user a reset link is for, without spending it; nil for an unknown, used or expired
    /// link, or one sent to an email the user no longer has.
    public func resetTarget(token: String) async throws(ParseError) -> ResetTarget? {
        guard Self.isPlausible(token) else { return nil }
        let rows = try await database.run("""
            SELECT u.object_id, u.username FROM user_tokens t JOIN users u ON u.object_id = t.user_id AND u.email = t.email
            WHERE t.token_hash = sha256(convert_to($1, 'UTF8')) AND t.kind = 'password_reset'
              AND (t.expires_at IS NULL OR t.expires_at > now()) AND NOT u.banned
            """, [.text(token)])
        guard let row = rows.first, let userId = row["object_id"].string else { return nil }
        return ResetTarget(userId: userId, username: row["username"].string ?? "")
    }

    /// Sets a new password through a reset link: the password policy first (142, the link still
    /// works), then the link and every other reset link of the user are spent, the password set
    /// and every session of the user revoked, in one transaction. Nil when the link does not
    /// work (any more); else the username.
    public func resetPassword(token: String, password: String) async throws(ParseError) -> String? {
        guard let target = try await resetTarget(token: token) else { return nil }
        guard !password.isEmpty else { throw ParseError.passwordMissing }
        try await users.checkPolicy(password, userId: target.userId, username: nil, on: database)
        let hash = try await users.hasher.hash(password, on: users.pool)
        let done: Bool
        do {
            done = try await database.transaction { tx -> Bool in
                let spent = try await tx.query("""
                    DELETE FROM user_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND kind = 'password_reset'
                    AND (expires_at IS NULL OR expires_at > now()) RETURNING user_id
                    """, [.text(token)])
                guard spent.first?["user_id"].string == target.userId else { return false }
                _ = try await tx.query("DELETE FROM user_tokens WHERE user_id = $1 AND kind = 'password_reset'", [.text(target.userId)])
                _ = try await tx.query("""
                    UPDATE users SET password_hash = $2, failed_logins = 0, locked_until = NULL, updated_at = now() WHERE object_id = $1
                    """, [.text(target.userId), .text(hash)])
                try await sessions.revokeAll(userId: target.userId, reason: .passwordReset, on: tx)
                return true
            }
        } catch let error as PostgresError {
            throw ParseError.database(error)
        } catch let error as ParseError {
            throw error
        } catch {
            throw ParseError.internalError("\(error)")
        }
        users.cache.invalidate(target.userId)
        return done ? target.username : nil
    }

    // MARK: Helpers

    /// The `email` of a request body: 204 when missing or empty, 125 when not a string.
    static func requestedEmail(_ value: JSONValue?) throws(ParseError) -> String {
        guard let value, !value.isNull, value.string != "" else { throw ParseError.emailMissing("you must provide an email") }
        guard let email = value.string, email.utf8.count <= UserStore.maxNameBytes, !email.utf8.contains(0) else {
            throw ParseError.invalidEmailAddress("you must provide a valid email string")
        }
        return email
    }

    /// Lowercase hex of a sane length: anything else cannot be a token (no statement runs).
    static func isPlausible(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count == tokenBytes * 2 else { return false }
        return utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}
