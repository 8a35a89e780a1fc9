import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// Every registered hook of the app, as one immutable snapshot.
public struct HookTable: Sendable {
    public let functions: [String: String]
    public let triggers: [String: String]

    init(_ hooks: [Hook]) {
        var functions: [String: String] = [:]
        var triggers: [String: String] = [:]
        for hook in hooks {
            switch hook {
            case .function(let name, let url): functions[name] = url
            case .trigger(let className, let trigger, let url): triggers[Self.key(className, trigger)] = url
            }
        }
        self.functions = functions
        self.triggers = triggers
    }

    /// The URL of `trigger` on `className`, if one is registered.
    public func url(of trigger: TriggerName, on className: String) -> String? { triggers[Self.key(className, trigger)] }

    /// True when no hook is registered.
    public var isEmpty: Bool { triggers.isEmpty && functions.isEmpty }

    /// True when `className` has a beforeFind or afterFind hook.
    public func hasFindTriggers(on className: String) -> Bool {
        !triggers.isEmpty && (url(of: .beforeFind, on: className) != nil || url(of: .afterFind, on: className) != nil)
    }

    static func key(_ className: String, _ trigger: TriggerName) -> String { className + "\u{0}" + trigger.rawValue }
}

/// The `cloud_hooks` table and this node's snapshot of it. A change on any node is announced
/// with `NOTIFY parley_hooks`; each node drops its snapshot on the notification and reads the
/// table again on next use. While the node's LISTEN connection is down (or not yet up), nothing
/// is cached: every use reads the table, so no node runs a hook that was changed elsewhere.
public final class HookStore: Sendable {
    /// The PostgreSQL channel of hook changes.
    public static let channel = "parley_hooks"

    private struct State {
        var table: HookTable?
        var generation = 0
        var listening = false
    }

    let database: PostgresClient
    private let state = Mutex(State())
    private let listener = Mutex<PostgresListener?>(nil)

    public init(database: PostgresClient) {
        self.database = database
    }

    /// The current hooks (from memory while listening and unchanged, else from PostgreSQL).
    public func table() async throws(CloudError) -> HookTable {
        let (cached, generation) = state.withLock { ($0.listening ? $0.table : nil, $0.generation) }
        if let cached { return cached }
        let loaded = HookTable(try await all())
        state.withLock { if $0.listening && $0.generation == generation { $0.table = loaded } }
        return loaded
    }

    /// The snapshot, if this node holds one it may trust (listening, unchanged since read):
    /// for answers made on the event loop without a task.
    public func cachedTable() -> HookTable? {
        state.withLock { $0.listening ? $0.table : nil }
    }

    /// Every hook, functions first, in registration order.
    public func all() async throws(CloudError) -> [Hook] {
        try await select("", [])
    }

    public func functions() async throws(CloudError) -> [Hook] {
        try await select("WHERE function_name IS NOT NULL", [])
    }

    public func triggers() async throws(CloudError) -> [Hook] {
        try await select("WHERE class_name IS NOT NULL", [])
    }

    public func function(_ name: String) async throws(CloudError) -> Hook? {
        try await select("WHERE function_name = $1", [.text(name)]).first
    }

    public func trigger(className: String, triggerName: String) async throws(CloudError) -> Hook? {
        try await select("WHERE class_name = $1 AND trigger_name = $2", [.text(className), .text(triggerName)]).first
    }

    /// Most hooks (functions and triggers together) one app may register.
    public static let maxHooks = 1000

    /// Parse's `createHook`: refuses an existing function or trigger (143), then stores it.
    public func create(_ hook: Hook) async throws(CloudError) -> Hook {
        let rows: PostgresRows
        do {
            rows = try await database.query("SELECT count(*)::int8 AS n FROM cloud_hooks")
        } catch {
            throw .database(error)
        }
        guard (rows.first?["n"].int ?? 0) < Self.maxHooks else { throw .tooManyHooks(Self.maxHooks) }
        switch hook {
        case .function(let name, _):
            if try await function(name) != nil { throw .functionExists(name) }
        case .trigger(let className, let trigger, _):
            if try await self.trigger(className: className, triggerName: trigger.rawValue) != nil {
                throw .triggerExists(className: className, trigger: trigger.rawValue)
            }
        }
        return try await save(hook)
    }

    /// Parse's `updateHook`: refuses a hook that does not exist (143), then stores it.
    public func update(_ hook: Hook) async throws(CloudError) -> Hook {
        switch hook {
        case .function(let name, _):
            if try await function(name) == nil { throw .noSuchFunctionHook(name) }
        case .trigger(let className, let trigger, _):
            if try await self.trigger(className: className, triggerName: trigger.rawValue) == nil { throw .noSuchTriggerHook(className: className) }
        }
        return try await save(hook)
    }

    /// Removes a function hook (no error when there is none, as Parse).
    public func deleteFunction(_ name: String) async throws(CloudError) {
        try await change("DELETE FROM cloud_hooks WHERE function_name = $1", [.text(name)])
    }

    /// Removes a trigger hook (no error when there is none, as Parse).
    public func deleteTrigger(className: String, triggerName: String) async throws(CloudError) {
        try await change("DELETE FROM cloud_hooks WHERE class_name = $1 AND trigger_name = $2", [.text(className), .text(triggerName)])
    }

    /// Upsert keyed by function name or (class, trigger), announced to every node.
    private func save(_ hook: Hook) async throws(CloudError) -> Hook {
        switch hook {
        case .function(let name, let url):
            try await change("""
                INSERT INTO cloud_hooks (function_name, url) VALUES ($1, $2)
                ON CONFLICT (function_name) WHERE function_name IS NOT NULL DO UPDATE SET url = EXCLUDED.url
                """, [.text(name), .text(url)])
        case .trigger(let className, let trigger, let url):
            try await change("""
                INSERT INTO cloud_hooks (class_name, trigger_name, url) VALUES ($1, $2, $3)
                ON CONFLICT (class_name, trigger_name) WHERE class_name IS NOT NULL DO UPDATE SET url = EXCLUDED.url
                """, [.text(className), .text(trigger.rawValue), .text(url)])
        }
        return hook
    }

    /// Runs a write and its NOTIFY in one statement (so the notification leaves with the commit),
    /// and drops this node's snapshot at once.
    private func change(_ sql: String, _ params: [PostgresData]) async throws(CloudError) {
        do {
            _ = try await database.query("WITH change AS (\(sql) RETURNING 1) SELECT pg_notify('\(Self.channel)', 'changed'), (SELECT count(*) FROM change)",
                                         params)
        } catch {
            throw .database(error)
        }
        invalidate()
    }

    private func select(_ filter: String, _ params: [PostgresData]) async throws(CloudError) -> [Hook] {
        let rows: PostgresRows
        do {
            rows = try await database.query("SELECT function_name, class_name, trigger_name, url FROM cloud_hooks \(filter) ORDER BY function_name IS NULL, id",
                                            params)
        } catch {
            throw .database(error)
        }
        return rows.compactMap { row -> Hook? in
            guard let url = row["url"].string else { return nil }
            if let name = row["function_name"].string { return .function(name: name, url: url) }
            guard let className = row["class_name"].string, let trigger = row["trigger_name"].string.flatMap(TriggerName.init(rawValue:)) else { return nil }
            return .trigger(className: className, trigger: trigger, url: url)
        }
    }

    /// Drops the snapshot (a change here or on another node).
    public func invalidate() {
        state.withLock {
            $0.table = nil
            $0.generation += 1
        }
    }

    private func setListening(_ listening: Bool) {
        state.withLock {
            $0.listening = listening
            $0.table = nil
            $0.generation += 1
        }
    }

    /// Starts the LISTEN connection on `loop`; until it listens nothing is cached. Call once.
    public func startListening(on loop: EventLoop, logger: Logger = Logger(label: "cloud.hooks")) {
        let configuration = database.configuration
        loop.execute { [self] in
            let listener = PostgresListener(loop: loop, configuration: configuration, logger: logger) { [self] _ in invalidate() }
            listener.onDisconnect = { [self] in setListening(false) }
            listener.onListening = { [self] in setListening(true) }
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
        setListening(false)
        listener.loop.execute { listener.close() }
    }
}
