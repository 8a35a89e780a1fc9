import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// A change that ends sessions, changes a user or the global config, announced to every node (PostgreSQL NOTIFY on
/// `AccountEvents.channel`, sent with the change so it is delivered only if the change commits).
/// Each node drops its cached copies and tells its observers (e.g. to close live sockets).
public enum AccountEvent: Sendable, Equatable {
    /// Why every session of a user ended.
    public enum Reason: String, Sendable {
        case banned, deleted, passwordChanged, passwordReset, revoked
    }

    /// One session ended (logout, `DELETE /sessions/:id`, `parley session revoke`).
    case sessionRevoked(token: String, userId: String)
    /// Every session of the user ended, except `keeping` (a session objectId) when given.
    case sessionsRevoked(userId: String, reason: Reason, keeping: String?)
    /// The user's fields changed: cached copies are stale.
    case userChanged(userId: String)
    /// `PUT /config` changed the global config: cached copies are stale.
    case configChanged
    /// A role or a role's membership changed: every user's cached roles are stale.
    case rolesChanged
    /// `/schemas` changed a class (fields, permissions, indexes, dropped): its cached schema is stale.
    case schemaChanged(className: String)

    /// The NOTIFY payload.
    var payload: String {
        let object: JSONValue
        switch self {
        case .sessionRevoked(let token, let userId):
            object = ["event": "sessionRevoked", "token": .string(token), "user": .string(userId)]
        case .sessionsRevoked(let userId, let reason, let keeping):
            object = ["event": "sessionsRevoked", "user": .string(userId), "reason": .string(reason.rawValue), "keeping": keeping.map(JSONValue.string) ?? .null]
        case .userChanged(let userId):
            object = ["event": "userChanged", "user": .string(userId)]
        case .configChanged:
            object = ["event": "configChanged"]
        case .rolesChanged:
            object = ["event": "rolesChanged"]
        case .schemaChanged(let className):
            object = ["event": "schemaChanged", "className": .string(className)]
        }
        return object.serialized()
    }

    /// The event of a NOTIFY payload, nil when malformed.
    init?(payload: String) {
        guard let value = try? JSONParser(maxDepth: 4, maxBytes: 4096).parse(payload) else { return nil }
        switch value["event"]?.string {
        case "configChanged": self = .configChanged; return
        case "rolesChanged": self = .rolesChanged; return
        case "schemaChanged":
            guard let className = value["className"]?.string else { return nil }
            self = .schemaChanged(className: className)
            return
        default: break
        }
        guard let user = value["user"]?.string else { return nil }
        switch value["event"]?.string {
        case "sessionRevoked":
            guard let token = value["token"]?.string else { return nil }
            self = .sessionRevoked(token: token, userId: user)
        case "sessionsRevoked":
            guard let reason = value["reason"]?.string.flatMap(Reason.init(rawValue:)) else { return nil }
            self = .sessionsRevoked(userId: user, reason: reason, keeping: value["keeping"]?.string)
        case "userChanged":
            self = .userChanged(userId: user)
        default:
            return nil
        }
    }
}

/// Publishes `AccountEvent`s with the changes that cause them and applies the ones received.
public final class AccountEvents: Sendable {
    /// The PostgreSQL channel events travel on.
    public static let channel = "parley_accounts"

    private let observers = Mutex<[@Sendable (AccountEvent) -> Void]>([])
    private let listener = Mutex<PostgresListener?>(nil)
    let sessionCache: SessionCache
    let userCache: UserCache
    let configCache: GlobalConfigStore
    let roleCache: RoleStore
    let schemaCache: SchemaStore

    init(sessionCache: SessionCache, userCache: UserCache, configCache: GlobalConfigStore, roleCache: RoleStore, schemaCache: SchemaStore) {
        self.roleCache = roleCache
        self.schemaCache = schemaCache
        self.sessionCache = sessionCache
        self.userCache = userCache
        self.configCache = configCache
    }

    /// Calls `observer` for every event, from this node or another (on a listener loop or the
    /// publishing task: keep it short and non-blocking).
    public func observe(_ observer: @escaping @Sendable (AccountEvent) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Sends `event` to every node (this one included: it is applied here at once too).
    func publish(_ event: AccountEvent, on db: any SQLExecutor) async throws(ParseError) {
        try await db.run("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(event.payload)])
        apply(event)
    }

    /// Drops the cached copies an event makes stale and tells the observers.
    public func apply(_ event: AccountEvent) {
        switch event {
        case .sessionRevoked(let token, _):
            sessionCache.invalidate(token: token)
        case .sessionsRevoked(let userId, _, _):
            sessionCache.invalidate(userId: userId)
            userCache.invalidate(userId)
        case .userChanged(let userId):
            userCache.invalidate(userId)
        case .configChanged:
            configCache.invalidate()
        case .rolesChanged:
            roleCache.invalidate()
        case .schemaChanged(let className):
            schemaCache.invalidate(className: className)
        }
        for observer in observers.withLock({ $0 }) { observer(event) }
    }

    /// Applies a NOTIFY payload received from PostgreSQL (ignores malformed ones).
    public func apply(payload: String) {
        if let event = AccountEvent(payload: payload) { apply(event) }
    }

    /// Starts a LISTEN connection on `loop` so events published by other nodes and by
    /// `parley user …` reach this node. Until it listens, and whenever it is disconnected, events
    /// may be missed: the session cache is suspended then (every session is read from
    /// PostgreSQL) and both caches start empty once it listens again. Call once; any thread.
    public func startListening(on loop: EventLoop, configuration: PostgresConfiguration, logger: Logger = Logger(label: "accounts.events")) {
        sessionCache.suspend()
        configCache.setListening(false)
        roleCache.setListening(false)
        schemaCache.setListening(false)
        loop.execute { [self] in
            let listener = PostgresListener(loop: loop, configuration: configuration, logger: logger) { [self] notification in
                apply(payload: notification.payload)
            }
            listener.onDisconnect = { [self] in
                sessionCache.suspend()
                userCache.removeAll()
                configCache.setListening(false)
                roleCache.setListening(false)
                schemaCache.setListening(false)
            }
            listener.onListening = { [self] in
                userCache.removeAll()
                configCache.setListening(true)
                roleCache.setListening(true)
                schemaCache.setListening(true)
                sessionCache.resume()
            }
            listener.listen(Self.channel)
            listener.start()
            self.listener.withLock { $0 = listener }
        }
    }

    /// Closes the LISTEN connection, if any.
    public func stopListening() {
        guard let listener = listener.withLock({ current -> PostgresListener? in
            defer { current = nil }
            return current
        }) else { return }
        listener.loop.execute { listener.close() }
    }
}
