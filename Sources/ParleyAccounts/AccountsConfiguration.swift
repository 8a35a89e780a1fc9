/// Settings of users, sessions and passwords.
public struct AccountsConfiguration: Sendable {
    /// How long a new session is valid (Parse's default: one year).
    public var sessionLifetimeSeconds: Int64
    /// Failed logins in a row that lock an account; nil disables lockout (the default, as Parse).
    public var lockoutThreshold: Int?
    /// How long a locked account stays locked, in minutes.
    public var lockoutMinutes: Int
    /// argon2id passes (libsodium "interactive" by default).
    public var passwordOperationsLimit: Int
    /// argon2id memory in bytes (libsodium "interactive", 64 MiB, by default).
    public var passwordMemoryLimit: Int
    /// argon2id jobs that may be queued or running at once; more are refused with 429/100.
    public var passwordHashQueue: Int
    /// Sessions kept in the in-memory cache.
    public var sessionCacheCapacity: Int
    /// How long a cached session is trusted before it is read again (bounds how long a session
    /// revoked on another node keeps working here).
    public var sessionCacheTTLSeconds: Int64
    /// How long `GET /users/me` may serve a cached copy of the user (bounds how stale a change
    /// made on another node, or by `parley user …`, can look).
    public var userCacheTTLMilliseconds: Int64
    /// What new passwords must satisfy and how long they live (Parse's `passwordPolicy`).
    public var passwordPolicy: PasswordPolicy
    /// New and changed emails get `emailVerified: false` and a verification mail (Parse's `verifyUserEmails`).
    public var verifyUserEmails: Bool
    /// With `verifyUserEmails`: a user with an unverified email cannot log in (205) and signs up
    /// without a session (Parse's `preventLoginWithUnverifiedEmail`).
    public var preventLoginWithUnverifiedEmail: Bool
    /// How long a verification link works (Parse's `emailVerifyTokenValidityDuration`); nil = until used.
    public var emailVerifyTokenValidity: Duration?
    /// Account mails (verification, reset) of one kind sent to one user per hour; more requests
    /// are answered as usual but mail nothing.
    public var accountMailsPerHour: Int

    public init(
        sessionLifetimeSeconds: Int64 = 365 * 24 * 3600,
        lockoutThreshold: Int? = nil,
        lockoutMinutes: Int = 5,
        passwordOperationsLimit: Int = PasswordHasher.interactiveOperations,
        passwordMemoryLimit: Int = PasswordHasher.interactiveMemory,
        passwordHashQueue: Int = 64,
        sessionCacheCapacity: Int = 100_000,
        sessionCacheTTLSeconds: Int64 = 30,
        userCacheTTLMilliseconds: Int64 = 5000,
        passwordPolicy: PasswordPolicy = .none,
        verifyUserEmails: Bool = false,
        preventLoginWithUnverifiedEmail: Bool = false,
        emailVerifyTokenValidity: Duration? = nil,
        accountMailsPerHour: Int = 5
    ) {
        self.sessionLifetimeSeconds = max(1, sessionLifetimeSeconds)
        self.lockoutThreshold = lockoutThreshold.flatMap { $0 > 0 ? $0 : nil }
        self.lockoutMinutes = max(1, lockoutMinutes)
        self.passwordOperationsLimit = passwordOperationsLimit
        self.passwordMemoryLimit = passwordMemoryLimit
        self.passwordHashQueue = max(1, passwordHashQueue)
        self.sessionCacheCapacity = max(1, sessionCacheCapacity)
        self.sessionCacheTTLSeconds = max(0, sessionCacheTTLSeconds)
        self.userCacheTTLMilliseconds = max(0, userCacheTTLMilliseconds)
        self.passwordPolicy = passwordPolicy
        self.verifyUserEmails = verifyUserEmails
        self.preventLoginWithUnverifiedEmail = verifyUserEmails && preventLoginWithUnverifiedEmail
        self.emailVerifyTokenValidity = emailVerifyTokenValidity
        self.accountMailsPerHour = max(1, accountMailsPerHour)
    }

    /// Whether a user with an unverified email is refused at login.
    var requiresVerifiedEmail: Bool { verifyUserEmails && preventLoginWithUnverifiedEmail }
}
