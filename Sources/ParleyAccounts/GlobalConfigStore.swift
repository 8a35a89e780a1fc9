import ParleyJSON
import Synchronization

/// Parse's global config (`GET|PUT /config`): one row of params, read from a per-node cache that
/// every change drops on every node (`AccountEvent.configChanged`).
public final class GlobalConfigStore: Sendable {
    /// The stored params and which ones only the master key reads.
    public struct Config: Sendable, Equatable {
        public var params: JSONObject
        public var masterKeyOnly: JSONObject
    }

    /// The cached config, nil when not loaded; `listening` false while changes from other nodes
    /// may be missed (every read then goes to PostgreSQL).
    private struct CacheState {
        var config: Config?
        var listening = true
    }

    private let cache = Mutex(CacheState())

    init() {}

    /// The config as `auth` sees it, in Parse Server's shape: without the master key the
    /// master-key-only params are left out.
    public func get(auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        let config = try await load(on: db)
        guard !auth.isMaster else {
            return ["params": .object(config.params), "masterKeyOnly": .object(config.masterKeyOnly)]
        }
        var params = JSONObject()
        var masterKeyOnly = JSONObject()
        for (key, value) in config.params where config.masterKeyOnly[key]?.bool != true {
            params[key] = value
            if let flag = config.masterKeyOnly[key] { masterKeyOnly[key] = flag }
        }
        return ["params": .object(params), "masterKeyOnly": .object(masterKeyOnly)]
    }

    /// Applies a `PUT /config` body (master key, checked by the caller): each param of `params`
    /// is set (or removed by `{"__op": "Delete"}`), its master-key-only flag set from
    /// `masterKeyOnly` (false when absent), as Parse Server does.
    public func update(body: JSONObject, events: AccountEvents, on db: any SQLExecutor) async throws(ParseError) {
        guard let params = (body["params"] ?? .object([:])).object else { throw ParseError.invalidJSON("params must be an object") }
        guard let flags = (body["masterKeyOnly"] ?? .object([:])).object else { throw ParseError.invalidJSON("masterKeyOnly must be an object") }
        var sets = JSONObject()
        var masterSets = JSONObject()
        var deletes: [String] = []
        for (key, value) in params {
            guard !key.isEmpty else { throw ParseError.invalidKeyName("config param names must not be empty") }
            if value["__op"]?.string == "Delete" {
                deletes.append(key)
            } else {
                sets[key] = value
                masterSets[key] = .bool(flags[key]?.bool ?? false)
            }
        }
        try await db.run("""
            INSERT INTO global_config (id, params, master_key_only) VALUES (1, $1::jsonb, $2::jsonb)
            ON CONFLICT (id) DO UPDATE SET params = (global_config.params || $1::jsonb) - $3::text[],
                master_key_only = (global_config.master_key_only || $2::jsonb) - $3::text[]
            """, [.json(JSONValue.object(sets).serialized()), .json(JSONValue.object(masterSets).serialized()), .textArray(deletes)]) { error in
            error.sqlState == "23514" ? .objectTooLarge("the config is limited to 1 MiB") : nil
        }
        try await events.publish(.configChanged, on: db)
    }

    /// The config from the cache, or read from PostgreSQL (and cached while listening).
    func load(on db: any SQLExecutor) async throws(ParseError) -> Config {
        if let cached = cache.withLock({ $0.listening ? $0.config : nil }) { return cached }
        let rows = try await db.run("SELECT params::text, master_key_only::text FROM global_config WHERE id = 1", [], readOnly: true)
        var config = Config(params: [:], masterKeyOnly: [:])
        if let row = rows.first {
            let parser = JSONParser(maxBytes: 2 << 20)
            config.params = (row[0].text.flatMap { try? parser.parse($0) })?.object ?? [:]
            config.masterKeyOnly = (row[1].text.flatMap { try? parser.parse($0) })?.object ?? [:]
        }
        cache.withLock { if $0.listening { $0.config = config } }
        return config
    }

    /// Drops the cached config (a change on some node).
    func invalidate() {
        cache.withLock { $0.config = nil }
    }

    /// Stops (false) or resumes (true) caching, with an empty cache either way.
    func setListening(_ listening: Bool) {
        cache.withLock { $0 = CacheState(config: nil, listening: listening) }
    }
}
