import ParleyJSON
import ParleyPostgres

/// SQL fragments for the ACL columns.
enum ACLSQL {
    /// `rperm`/`wperm` values for a new row: the ACL's lists, or `{*}` when there is none.
    static func permissions(_ acl: ACL?) -> (readers: [String], writers: [String]) {
        guard let acl else { return (["*"], ["*"]) }
        return (acl.readers, acl.writers)
    }

    /// `acl = …, rperm = …, wperm = …` assignments for an update that changes the ACL
    /// (`nil` ACL: removed, public again).
    static func assignments(_ acl: ACL?, public defaults: (readers: [String], writers: [String]) = (["*"], ["*"]), builder: inout SQLBuilder) -> String {
        let (readers, writers) = acl.map { ($0.readers, $0.writers) } ?? defaults
        let json: PostgresData = acl.map { .json(JSONValue.object($0.json).serialized()) } ?? .null
        return "acl = \(builder.bind(json))::jsonb, rperm = \(builder.bind(.textArray(readers))), wperm = \(builder.bind(.textArray(writers)))"
    }

    /// ` AND <column> && ARRAY[…]` for a non-master caller, empty for master.
    static func filter(_ column: String, auth: Auth, builder: inout SQLBuilder) -> String {
        guard !auth.isMaster else { return "" }
        return " AND \(column) && \(builder.bind(.textArray(auth.permissionKeys)))"
    }

    /// ` AND (…)` for class-level pointer permissions: one of `fields` (a `_User` pointer, or an
    /// array holding one) points to the viewer; with no session nothing matches. Empty without
    /// fields. The same test the query compiler makes for `{field: pointer}`.
    /// `columns` maps fields stored as typed `_User` pointer columns (an installation's `user`) to them.
    static func pointerFilter(_ fields: [String], auth: Auth, builder: inout SQLBuilder, columns: [String: String] = [:]) -> String {
        guard !fields.isEmpty else { return "" }
        guard let userId = auth.userId else { return " AND FALSE" }
        let pointer = builder.bind(.json(ParseValue.pointer(className: ClassName.user, objectId: userId).serialized()))
        let tests = fields.map { field in
            if let column = columns[field] { return "\(column) = \(builder.bind(.text(userId)))" }
            let key = builder.bind(.text(field))
            return "data -> \(key)::text @> \(pointer)::jsonb OR data -> \(key)::text @> jsonb_build_array(\(pointer)::jsonb)"
        }
        return " AND (" + tests.joined(separator: " OR ") + ")"
    }

    /// The `where` constraint of the same pointer permissions, for a find: nil without fields.
    static func pointerConstraint(_ fields: [String], userId: String) -> JSONValue? {
        guard !fields.isEmpty else { return nil }
        let pointer = ParseValue.pointer(className: ClassName.user, objectId: userId)
        return ["$or": .array(fields.map { .object([$0: pointer]) })]
    }

    /// The `geo` value for a GeoPoint being set.
    static func geo(latitude: Double, longitude: Double, builder: inout SQLBuilder) -> String {
        "ll_to_earth(\(builder.bind(.double(latitude))), \(builder.bind(.double(longitude))))"
    }
}
