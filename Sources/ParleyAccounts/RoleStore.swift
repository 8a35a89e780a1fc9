import ParleyPostgres

/// Role membership: the roles a user holds, directly or inherited, read from the Relation join
/// tables in Parse Server's Postgres naming (`_Join:<relationKey>:<ownerClass>`, columns
/// `relatedId` and `owningId`; migration 0013 creates the two of `_Role`), shared with the
/// Relations storage.
///
/// Inheritance follows Parse Server (`Auth._getAllRolesNamesForRoleIds`): a user in role B also
/// holds every role A whose `roles` relation contains B.
public struct RoleStore: Sendable {
    /// The most role names one answer carries (`UNION` makes the walk end on cycles; the
    /// walk itself is bounded by the roles that exist).
    public static let maximumRoles = 1000
    /// The join table of `_Role.users` (owningId: the role, relatedId: the user).
    public static let usersJoinTable = "_Join:users:_Role"
    /// The join table of `_Role.roles` (owningId: the inheriting role, relatedId: its member role).
    public static let rolesJoinTable = "_Join:roles:_Role"

    public init() {}

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
