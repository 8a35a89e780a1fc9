import ParleyJSON
import ParleyPostgres

/// Relation fields on any class: `AddRelation`, `RemoveRelation` (and a `Batch` of them) in a
/// create or update body, kept in the join table `_Join:<field>:<class>` as Parse Server on
/// PostgreSQL keeps them (migrations/0018_relations.sql), and cleaned up when the owner is
/// deleted. `_Role`'s `users` and `roles` go through the same code (`RoleWriter`).
///
/// The object itself goes through `ObjectStore`, so ACLs and write permission are the same rule
/// as for any write; relation changes are applied only after that write succeeded, in the same
/// transaction. The field's value in the object is `{"__type":"Relation","className":…}`, which
/// also records the field as `Relation<target>` in the class's schema (111 on a mismatch).
public struct RelationWriter: Sendable {
    let database: PostgresClient
    let objects: ObjectStore

    /// Longest join table name: PostgreSQL truncates identifiers beyond 63 bytes, and its index
    /// adds `_owning`.
    static let maxJoinTableBytes = 56

    /// A relation change read from a write body.
    struct Change: Sendable {
        let table: String
        let add: Bool
        let ids: [String]
    }

    /// `_Join:<field>:<className>`.
    static func joinTable(field: String, className: String) -> String {
        "_Join:" + field + ":" + className
    }

    /// Creates an object of a user-defined class with its relation changes.
    public func create(className: String, body: JSONObject, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        var body = body
        var types: [(field: String, type: ParseFieldType)] = []
        let changes = try Self.take(&body, className: className, types: &types)
        guard !changes.isEmpty || !types.isEmpty else { return try await objects.create(className: className, body: body, auth: auth, access: access, on: db) }
        let object = body, recorded = types
        return try await atomically(db) { db throws(ParseError) in
            try ObjectStore.validate(className: className)
            try await objects.schemas.resolve(className: className, record: recorded, on: db)
            let created = try await objects.create(className: className, body: object, auth: auth, access: access, on: db)
            try await apply(changes, owner: created["objectId"]?.string ?? "", on: db)
            return created
        }
    }

    /// Updates an object the viewer may write (101 otherwise), then its relations.
    public func update(className: String, objectId: String, body: JSONObject, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        var body = body
        var types: [(field: String, type: ParseFieldType)] = []
        let changes = try Self.take(&body, className: className, types: &types)
        guard !changes.isEmpty || !types.isEmpty else { return try await objects.update(className: className, objectId: objectId, body: body, auth: auth, access: access, on: db) }
        let object = body, recorded = types
        return try await atomically(db) { db throws(ParseError) in
            try ObjectStore.validate(className: className)
            try await objects.schemas.resolve(className: className, record: recorded, on: db)
            let updated = try await objects.update(className: className, objectId: objectId, body: object, auth: auth, access: access, on: db)
            try await apply(changes, owner: objectId, on: db)
            return updated
        }
    }

    /// Deletes an object the viewer may write (101 otherwise) and the join rows it owns.
    public func delete(className: String, objectId: String, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) {
        try await atomically(db) { db throws(ParseError) in
            try await objects.delete(className: className, objectId: objectId, auth: auth, access: access, on: db)
            try await deleteOwned(className: className, objectId: objectId, on: db)
        }
    }

    /// A write through a system class's own store (`_User`, `_Installation` updates): the relation
    /// changes are taken out of `body`, `write` runs with the rest, then the changes apply to the
    /// relations `owner` owns, in one transaction.
    public func write(systemClass className: String, owner: String, body: JSONObject, on db: any SQLExecutor,
                      _ write: @escaping @Sendable (JSONObject, any SQLExecutor) async throws(ParseError) -> JSONObject) async throws(ParseError) -> JSONObject {
        var body = body
        var types: [(field: String, type: ParseFieldType)] = []
        let changes = try Self.take(&body, className: className, types: &types)
        guard !changes.isEmpty || !types.isEmpty else { return try await write(body, db) }
        let object = body, recorded = types
        return try await atomically(db) { db throws(ParseError) in
            try await objects.schemas.resolve(className: className, record: recorded, on: db)
            let result = try await write(object, db)
            try await apply(changes, owner: owner, on: db)
            return result
        }
    }

    /// A delete through a system class's own store, then of the join rows the object owns, in one transaction.
    public func delete(systemClass className: String, objectId: String, on db: any SQLExecutor,
                       _ delete: @escaping @Sendable (any SQLExecutor) async throws(ParseError) -> Void) async throws(ParseError) {
        try await atomically(db) { db throws(ParseError) in
            try await delete(db)
            try await deleteOwned(className: className, objectId: objectId, on: db)
        }
    }

    /// Deletes the join rows `objectId` owns in every Relation field of its class.
    func deleteOwned(className: String, objectId: String, on db: any SQLExecutor) async throws(ParseError) {
        _ = try await db.run("SELECT parley_relation_delete_owner($1, $2)", [.text(className), .text(objectId)])
    }

    /// Applies `changes` to the relations owned by `owner` (one statement per change).
    func apply(_ changes: [Change], owner: String, on db: any SQLExecutor) async throws(ParseError) {
        for change in changes where !change.ids.isEmpty {
            _ = try await db.run("SELECT parley_relation_change($1, $2, $3::text[], $4)",
                                 [.text(change.table), .text(owner), .textArray(change.ids), .bool(change.add)])
        }
    }

    /// Takes relation operations (and `{"__type":"Relation"}` values) out of `body`. A field of
    /// `fixed` must be changed by relation operations on pointers to its class (111 otherwise;
    /// `notRelation` words it); any other adds its `Relation<target>` type to `types`, for the
    /// schema (the object's answers get the Relation value from the schema, `RowJSON`).
    /// 111 for pointers of mixed classes, 106 for anything but pointers, 107 beyond
    /// `FieldOperation.maxObjects`.
    static func take(_ body: inout JSONObject, className: String, types: inout [(field: String, type: ParseFieldType)], fixed: [String: String] = [:],
                     notRelation: (String) -> String = { "\($0) is a Relation: change it with AddRelation or RemoveRelation" }) throws(ParseError) -> [Change] {
        var changes: [Change] = []
        for (key, value) in body {
            let target = fixed[key]
            if target == nil, case .object(let typed) = value, typed["__type"]?.string == "Relation" {
                if case (.relation(let relatedClass)?, _) = try ParseValue.normalise(value) {
                    types.append((key, .relation(targetClass: relatedClass)))
                }
                body[key] = nil
                continue
            }
            guard case .object(let op) = value, let name = op["__op"]?.string, ["AddRelation", "RemoveRelation", "Batch"].contains(name) else {
                if target != nil { throw .incorrectType(notRelation(key)) }
                continue
            }
            var operations: [JSONObject] = [op]
            if name == "Batch" {
                guard let items = op["ops"]?.array, items.count <= 2 else { throw .incorrectType("a Batch operation holds at most an AddRelation and a RemoveRelation") }
                operations = []
                for item in items {
                    guard case .object(let inner) = item, let innerName = inner["__op"]?.string, innerName == "AddRelation" || innerName == "RemoveRelation" else {
                        throw .incorrectType("a Batch operation holds only AddRelation and RemoveRelation")
                    }
                    operations.append(inner)
                }
            }
            let table = joinTable(field: key, className: className)
            guard table.utf8.count <= maxJoinTableBytes else { throw .invalidKeyName("Relation field name too long: \(key)") }
            var relatedClass = target
            for operation in operations {
                let opName = operation["__op"]?.string ?? ""
                guard let items = operation["objects"]?.array else { throw .invalidJSON("objects to \(opName) must be an array") }
                guard items.count <= FieldOperation.maxObjects else { throw .invalidJSON("at most \(FieldOperation.maxObjects) objects per \(opName)") }
                var ids: [String] = []
                for item in items {
                    guard case .object(let pointer) = item, pointer["__type"]?.string == "Pointer", let id = pointer["objectId"]?.string,
                          !id.isEmpty, id.utf8.count <= 120 else {
                        throw .invalidPointer("\(opName) objects must be pointers")
                    }
                    if id.utf8.contains(0) { throw .nulCharacter }
                    let itemClass = pointer["className"]?.string ?? ""
                    if let expected = relatedClass, itemClass != expected {
                        throw .incorrectType("Related object must be of class \(expected), but \(itemClass.isEmpty ? "nothing" : itemClass) was passed in.")
                    }
                    guard ClassName.isValid(itemClass) || ClassName.isSystem(itemClass) else {
                        throw .invalidClassName("Invalid classname: \(itemClass)")
                    }
                    relatedClass = itemClass
                    ids.append(id)
                }
                changes.append(Change(table: table, add: opName == "AddRelation", ids: ids))
            }
            if target == nil, let relatedClass { types.append((key, .relation(targetClass: relatedClass))) }
            body[key] = nil
        }
        return changes
    }

    /// Runs `body` in one transaction: `db` itself when it is one (a transactional batch).
    func atomically<T: Sendable>(_ db: any SQLExecutor, _ body: @Sendable (any SQLExecutor) async throws(ParseError) -> T) async throws(ParseError) -> T {
        if let transaction = db as? PostgresTransaction { return try await body(transaction) }
        do {
            return try await database.transaction { transaction in try await body(transaction) }
        } catch let error as ParseError {
            throw error
        } catch let error as PostgresError {
            throw ParseError.database(error)
        } catch {
            throw ParseError.internalError("relation write: \(error)")
        }
    }
}
