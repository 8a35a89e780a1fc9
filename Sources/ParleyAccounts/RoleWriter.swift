import ParleyJSON
import ParleyPostgres

/// Writes of `_Role` objects: Parse's role rules (name and ACL required, name format, unique,
/// not changeable), the `users` and `roles` relations kept in the join tables `RoleStore`
/// reads, and `rolesChanged` after every write so every node drops its cached roles.
///
/// The object itself goes through `ObjectStore`, so ACLs and write permission are the same
/// rule as for any object; relation changes are applied only after that write succeeded, in the
/// same transaction.
public struct RoleWriter: Sendable {
    let relations: RelationWriter
    let roles: RoleStore
    let events: AccountEvents

    private var objects: ObjectStore { relations.objects }

    /// `_Role`'s two relations and the class of their members.
    private static let roleRelations = ["users": ClassName.user, "roles": ClassName.role]

    /// Parse's role name rule: letters, digits, `_`, `-` and spaces, not empty, at most 128 bytes.
    public static func validName(_ value: JSONValue) throws(ParseError) -> String {
        guard let name = value.string else { throw .incorrectType("A role's name must be a String.") }
        let allowed = !name.isEmpty && name.utf8.count <= 128 && name.utf8.allSatisfy { byte in
            (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || byte == 95 || byte == 45 || byte == 32
        }
        guard allowed else { throw .incorrectType("A role's name can only contain alphanumeric characters, _, -, and spaces.") }
        return name
    }

    /// Creates a role: returns `{objectId, createdAt}`.
    public func create(body: JSONObject, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        var body = body
        let changes = try Self.takeRelations(&body)
        guard let nameValue = body["name"] else { throw .incorrectType("name is required.") }
        let name = try Self.validName(nameValue)
        guard let acl = body["ACL"], !acl.isNull else { throw .incorrectType("ACL is required.") }
        let object = body
        return try await relations.atomically(db) { db throws(ParseError) in
            try await ensureUnused(name, on: db)
            let created = try await objects.create(className: ClassName.role, body: object, auth: auth, on: db)
            try await relations.apply(changes, owner: created["objectId"]?.string ?? "", on: db)
            try await roles.rolesChanged(events: events, on: db)
            return created
        }
    }

    /// Updates a role the viewer may write (101 otherwise); the name cannot change, the ACL
    /// cannot be removed.
    public func update(objectId: String, body: JSONObject, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        var body = body
        let changes = try Self.takeRelations(&body)
        if let acl = body["ACL"], Self.removes(acl) { throw .incorrectType("ACL is required.") }
        if let nameValue = body.removeValue(forKey: "name") {
            let name = try Self.validName(nameValue)
            var builder = SQLBuilder()
            let sql = "SELECT data->>'name' AS name FROM objects WHERE class_name = '_Role' AND object_id = \(builder.bind(.text(objectId)))"
            let current = try await db.run(sql, builder.params, readOnly: true).first?["name"].string
            guard current == nil || current == name else { throw .incorrectType("A role's name can only be set before it has been saved.") }
        }
        let object = body
        return try await relations.atomically(db) { db throws(ParseError) in
            let updated = try await objects.update(className: ClassName.role, objectId: objectId, body: object, auth: auth, access: access, on: db)
            try await relations.apply(changes, owner: objectId, on: db)
            try await roles.rolesChanged(events: events, on: db)
            return updated
        }
    }

    /// Deletes a role the viewer may write (101 otherwise) and its memberships.
    public func delete(objectId: String, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) {
        try await relations.atomically(db) { db throws(ParseError) in
            try await objects.delete(className: ClassName.role, objectId: objectId, auth: auth, access: access, on: db)
            var builder = SQLBuilder()
            let id = builder.bind(.text(objectId))
            _ = try await db.run("DELETE FROM \"\(RoleStore.usersJoinTable)\" WHERE \"owningId\" = \(id)", builder.params)
            _ = try await db.run("DELETE FROM \"\(RoleStore.rolesJoinTable)\" WHERE \"owningId\" = \(id) OR \"relatedId\" = \(id)", builder.params)
            try await roles.rolesChanged(events: events, on: db)
        }
    }

    /// Whether an update value takes the field away (null or `Delete`).
    private static func removes(_ value: JSONValue) -> Bool {
        if value.isNull { return true }
        if case .object(let op) = value, op["__op"]?.string == "Delete" { return true }
        return false
    }

    /// 137 when a role named `name` exists (the unique index `objects_role_name` settles races).
    private func ensureUnused(_ name: String, on db: any SQLExecutor) async throws(ParseError) {
        var builder = SQLBuilder()
        let sql = "SELECT 1 FROM objects WHERE class_name = '_Role' AND data->>'name' = \(builder.bind(.text(name))) LIMIT 1"
        guard try await db.run(sql, builder.params, readOnly: true).isEmpty else {
            throw .duplicateValue("A duplicate value for a field with unique values was provided")
        }
    }

    /// Removes `users` and `roles` from `body` as relation changes (111 unless each is an
    /// `AddRelation`/`RemoveRelation` of pointers to `_User` / `_Role`).
    static func takeRelations(_ body: inout JSONObject) throws(ParseError) -> [RelationWriter.Change] {
        var types: [(field: String, type: ParseFieldType)] = []
        return try RelationWriter.take(&body, className: ClassName.role, types: &types, fixed: roleRelations) { key in
            "\(key) of a role can only be changed with AddRelation or RemoveRelation"
        }
    }
}
