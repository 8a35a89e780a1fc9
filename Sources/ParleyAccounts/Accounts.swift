import ParleyLog
import ParleyNet
import ParleyPostgres

/// The accounts domain: users, sessions, objects, installations and their schema, over one
/// PostgreSQL client. Shared by the REST layer and the admin CLI; Sendable, create one per process.
public final class Accounts: Sendable {
    public let database: PostgresClient
    public let blockingPool: BlockingPool
    public let configuration: AccountsConfiguration
    public let hasher: PasswordHasher
    public let schemas: SchemaStore
    public let sessions: SessionStore
    public let users: UserStore
    public let objects: ObjectStore
    public let installations: InstallationStore
    /// Role membership (`role:` ACL entries).
    public let roles: RoleStore
    /// `_Role` writes (`/roles`, `/classes/_Role`).
    public let roleWriter: RoleWriter
    /// Writes of other user-defined classes, with their Relation fields.
    public let relations: RelationWriter
    /// Session and user changes, published to every node; observe them to close live sockets.
    public let events: AccountEvents
    /// Parse's global config (`/config`).
    public let config: GlobalConfigStore
    /// Email verification and password reset mails and links.
    public let emails: AccountEmails

    /// The SQL function through which other modules' statements learn which ids are users,
    /// `(ids text[]) → SETOF text` (migrations/0009_realtime_devices_contacts.sql): they call it
    /// instead of reading `users`.
    public static let existingUsersFunction = "accounts_existing_users"
    public let logger: Logger

    /// Builds the stores. Computes the dummy password hash once (blocking, tens of milliseconds).
    /// `authData` verifies logins with `authData` (none enabled by default: 252); `mailer`
    /// queues verification and reset mails (none by default).
    public init(database: PostgresClient, blockingPool: BlockingPool, configuration: AccountsConfiguration = AccountsConfiguration(),
                authData: any AuthDataVerifier = NoAuthDataVerifier(), mailer: any AccountMailer = NoAccountMailer(),
                logger: Logger = Logger(label: "accounts")) {
        self.database = database
        self.blockingPool = blockingPool
        self.configuration = configuration
        self.logger = logger
        hasher = PasswordHasher(operationsLimit: configuration.passwordOperationsLimit, memoryLimit: configuration.passwordMemoryLimit,
                                maxPendingJobs: configuration.passwordHashQueue)
        schemas = SchemaStore()
        let sessionCache = SessionCache(capacity: configuration.sessionCacheCapacity, ttlSeconds: configuration.sessionCacheTTLSeconds)
        let userCache = UserCache(capacity: configuration.sessionCacheCapacity, ttlMilliseconds: configuration.userCacheTTLMilliseconds)
        config = GlobalConfigStore()
        roles = RoleStore(capacity: configuration.sessionCacheCapacity)
        events = AccountEvents(sessionCache: sessionCache, userCache: userCache, configCache: config, roleCache: roles)
        sessions = SessionStore(cache: sessionCache, lifetimeSeconds: configuration.sessionLifetimeSeconds, events: events)
        users = UserStore(schemas: schemas, sessions: sessions, hasher: hasher, pool: blockingPool, configuration: configuration, cache: userCache, roles: roles,
                          authData: authData)
        emails = AccountEmails(database: database, users: users, sessions: sessions, mailer: mailer, configuration: configuration, logger: logger)
        objects = ObjectStore(schemas: schemas)
        installations = InstallationStore(schemas: schemas)
        relations = RelationWriter(database: database, objects: objects)
        roleWriter = RoleWriter(relations: relations, roles: roles, events: events)
    }

    /// Runs `body` in one transaction; a thrown error rolls everything back.
    public func transaction<T: Sendable>(_ body: @Sendable (PostgresTransaction) async throws -> T) async throws -> T {
        try await database.transaction(body)
    }
}
