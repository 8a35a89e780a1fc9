import ParleyNet
import ParleyPostgres

/// Parse Server's `passwordPolicy`: what a new password must satisfy, how long a password
/// lives, and how long reset links stay valid. Checked by signup, `PUT /users/:id`, the reset
/// flow and the admin CLI through `UserStore`; errors carry Parse's codes (142, 101).
public struct PasswordPolicy: Sendable {
    /// A regular expression a password must contain a match of (Parse's `validatorPattern`;
    /// Swift regex syntax, which covers the usual JavaScript patterns).
    public let validatorPattern: String?
    /// The message of a 142 for a password the pattern refuses (Parse's `validationError`).
    public var validationError: String?
    /// A password may not contain the username.
    public var doNotAllowUsername: Bool
    /// A password older than this must be reset before the next login (Parse's `maxPasswordAge`, in days there).
    public var maxPasswordAge: Duration?
    /// A new password may not be the current one or one of the `maxPasswordHistory - 1` before it (0...20).
    public var maxPasswordHistory: Int
    /// How long a password-reset link works (Parse's `resetTokenValidityDuration`); nil = until used.
    public var resetTokenValidityDuration: Duration?
    /// A second reset request while a link is valid mails the same link (Parse's `resetTokenReuseIfValid`).
    public var resetTokenReuseIfValid: Bool

    /// Parse's bound on `maxPasswordHistory`.
    public static let maxHistory = 20
    /// The default message of a 142.
    public static let defaultValidationError = "Password does not meet the Password Policy requirements."

    /// No rules (Parse's default).
    public static let none = PasswordPolicy()

    /// Fails when `validatorPattern` is not a valid regular expression or `maxPasswordHistory`
    /// is outside 0...20.
    public init(validatorPattern: String? = nil, validationError: String? = nil, doNotAllowUsername: Bool = false, maxPasswordAge: Duration? = nil,
                maxPasswordHistory: Int = 0, resetTokenValidityDuration: Duration? = nil, resetTokenReuseIfValid: Bool = false) throws(PasswordPolicyError) {
        if let validatorPattern {
            guard (try? Regex(validatorPattern)) != nil else { throw .invalidPattern(validatorPattern) }
        }
        guard (0...Self.maxHistory).contains(maxPasswordHistory) else { throw .invalidHistory(maxPasswordHistory) }
        guard !resetTokenReuseIfValid || resetTokenValidityDuration != nil else { throw .reuseWithoutValidity }
        self.validatorPattern = validatorPattern
        self.validationError = validationError
        self.doNotAllowUsername = doNotAllowUsername
        self.maxPasswordAge = maxPasswordAge
        self.maxPasswordHistory = maxPasswordHistory
        self.resetTokenValidityDuration = resetTokenValidityDuration
        self.resetTokenReuseIfValid = resetTokenReuseIfValid
    }

    private init() {
        validatorPattern = nil
        doNotAllowUsername = false
        maxPasswordHistory = 0
        resetTokenReuseIfValid = false
    }

    /// Whether any rule applies to a new password.
    public var checksNewPasswords: Bool { validatorPattern != nil || doNotAllowUsername || maxPasswordHistory > 0 }

    /// 142 when `password` fails the pattern or contains `username`.
    public func validate(_ password: String, username: String?) throws(ParseError) {
        if let validatorPattern, let regex = try? Regex(validatorPattern), !password.contains(regex) {
            throw ParseError.validationFailed(validationError ?? Self.defaultValidationError)
        }
        if doNotAllowUsername, let username, !username.isEmpty, password.contains(username) {
            throw ParseError.validationFailed("Password cannot contain your username.")
        }
    }

    /// Whether a password set at `changedAt` (Unix ms) has expired at `now`.
    public func isExpired(changedAt: Int64?, now: Int64) -> Bool {
        guard let maxPasswordAge, let changedAt else { return false }
        return changedAt + maxPasswordAge.wholeMilliseconds < now
    }

    /// The 101 Parse answers a login with an expired password.
    public static let expired = ParseError.objectNotFound("Your password has expired. Please reset your password.")

    /// 142 when `password` verifies against the user's current hash or one of the last
    /// `maxPasswordHistory - 1` it replaced (argon2id on `pool`, one verification per hash).
    func checkHistory(_ password: String, userId: String, hasher: PasswordHasher, pool: BlockingPool, on db: any SQLExecutor) async throws(ParseError) {
        guard maxPasswordHistory > 0 else { return }
        let rows = try await db.run("""
            (SELECT password_hash, 0::bigint AS rank FROM users WHERE object_id = $1 AND password_hash IS NOT NULL)
            UNION ALL
            (SELECT password_hash, id AS rank FROM user_password_history WHERE user_id = $1 ORDER BY id DESC LIMIT $2)
            """, [.text(userId), .int(maxPasswordHistory - 1)])
        for row in rows {
            guard let hash = row["password_hash"].string else { continue }
            if try await hasher.verify(password, hash: hash, on: pool) {
                throw ParseError.validationFailed("New password should not be the same as last \(maxPasswordHistory) passwords.")
            }
        }
    }
}

/// A password policy that cannot be used.
public enum PasswordPolicyError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidPattern(String)
    case invalidHistory(Int)
    case reuseWithoutValidity

    public var description: String {
        switch self {
        case .invalidPattern(let pattern): "validatorPattern \(pattern) is not a valid regular expression"
        case .invalidHistory(let count): "maxPasswordHistory \(count) is outside 0...\(PasswordPolicy.maxHistory)"
        case .reuseWithoutValidity: "resetTokenReuseIfValid needs resetTokenValidityDuration"
        }
    }
}
