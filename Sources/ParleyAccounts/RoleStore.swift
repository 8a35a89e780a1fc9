import ParleyPostgres
import Synchronization

/// Role membership: the roles a user holds, directly or inherited, read from the Relation join
/// tables in Parse Server's Postgres naming (`_Join:<relationKey>:<ownerClass>`, columns
/// `relatedId` and `owningId`; migration 0013 creates the two of `_Role`), shared with the
/// Relations storage.
///
/// Inheritance follows Parse Server (`Auth._getAllRolesNamesForRoleIds`): a user in role B also
/// holds every role A whose `roles` relation contains B.
///
/// Each node caches every user's answer until a role changes anywhere
/// (`AccountEvent.rolesChanged` drops the whole cache on every node); while events may be missed
/// nothing is cached.
public final class RoleStore: Sendable {
    /// The most role names one answer carries (`UNION` makes the walk end on cycles; the
    /// walk itself is bounded by the roles that exist).
    public static let maximumRoles = 1000
    /// The join table of `_Role.users` (owningId: the role, relatedId: the user).
    public static let usersJoinTable = "_Join:users:_Role"
    /// The join table of `_Role.roles` (owningId: the inheriting role, relatedId: its member role).
    public static let rolesJoinTable = "_Join:roles:_Role"

    private struct CacheState {
        var keys: [String: [String]] = [:]
        var listening = true
        /// Counts invalidations: an answer read before one is not cached after it.
        var generation = 0
    }

    private let cache = Mutex(CacheState())
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The `role:<name>` entries of `userId`'s roles, from the cache or PostgreSQL.
    public func permissionKeys(of userId: String, on db: any SQLExecutor) async throws(ParseError) -> [String] {
        if let cached = cachedPermissionKeys(of: userId) { return cached }
        let generation = cache.withLock { $0.generation }
        let keys = Self.permissionKeys(try await roleNames(of: userId, on: db))
        put(keys, for: userId, since: generation)
        return keys
    }

    /// A user that signed up just now holds no role.
    func noteNewUser(_ userId: String) {
        put([], for: userId, since: cache.withLock { $0.generation })
    }

    private func put(_ keys: [String], for userId: String, since generation: Int) {
        cache.withLock { state in
            guard state.listening, state.generation == generation else { return }
            if state.keys.count >= capacity { state.keys.removeAll(keepingCapacity: true) }
            state.keys[userId] = keys
        }
    }

    /// The cached entries of `userId`, nil when not cached.
    @inline(__always)
    public func cachedPermissionKeys(of userId: String) -> [String]? {
        cache.withLock { $0.keys[userId] }
    }

    /// Announces a change to roles or their membership: every node drops its cache.
    public func rolesChanged(events: AccountEvents, on db: any SQLExecutor) async throws(ParseError) {
        try await events.publish(.rolesChanged, on: db)
    }

    /// Drops every cached answer.
    func invalidate() {
        cache.withLock { state in
            state.keys.removeAll()
            state.generation &+= 1
        }
    }

    /// Stops (false) or resumes (true) caching, with an empty cache either way.
    func setListening(_ listening: Bool) {
        cache.withLock { state in
            state = CacheState(keys: [:], listening: listening, generation: state.generation &+ 1)
        }
    }

    /// The names of every role `userId` holds, sorted, at most `maximumRoles`.
    public func roleNames(of userId: String, on db: any SQLExecutor) async throws(ParseError) -> [String] {
        let rows = try await db.run("""
            WITH RECURSIVE held(role_id) AS (
                SELECT "owningId" FROM "\(Self.usersJoinTable)" WHERE "relatedId" = $1
                UNION
                SELECT j."owningId" FROM "\(Self.rolesJoinTable)" j JOIN held ON j."relatedId" = held.role_id
            )
            SELECT DISTINCT o.data->>'name' AS name FROM objects o
            WHERE o.class_name = '_Role' AND o.object_id IN (SELECT role_id FROM held) AND o.data->>'name' IS NOT NULL
            ORDER BY 1 LIMIT $2
            """, [.text(userId), .int(Self.maximumRoles)], readOnly: true)
        return rows.compactMap { $0[0].text }
    }

    /// The `rperm`/`wperm` entries the roles grant: `role:<name>` each.
    public static func permissionKeys(_ names: [String]) -> [String] {
        names.map { "role:" + $0 }
    }
}
