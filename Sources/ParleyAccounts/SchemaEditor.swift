import ParleyJSON
import ParleyPostgres

/// `/schemas` (master key, checked by the caller): lists, creates, changes and drops classes
/// with their fields, class-level permissions and indexes, as Parse Server's `SchemasRouter`
/// and `SchemaController` on PostgreSQL, with their error codes. Each change runs in one
/// transaction and is announced to every node (`AccountEvent.schemaChanged`).
///
/// An index is a real PostgreSQL index on `objects`: a btree over the named `data` members,
/// partial on the class (`WHERE class_name = …`).
public struct SchemaEditor: Sendable {
    let database: PostgresClient
    let schemas: SchemaStore
    let events: AccountEvents

    /// Every class: `{"results":[schema…]}` ordered by name.
    public func list(on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        let classes = try await db.run("SELECT class_name, permissions::text, indexes::text FROM parse_classes ORDER BY class_name", [], readOnly: true)
        let fields = try await db.run("SELECT class_name, field, type, target_class, required, default_value::text FROM class_schemas ORDER BY class_name, field", [], readOnly: true)
        var byClass: [String: [PostgresRow]] = [:]
        for row in fields { if let name = row[0].text { byClass[name, default: []].append(row) } }
        var results: [JSONValue] = []
        for row in classes {
            guard let name = row[0].text else { continue }
            results.append(.object(Self.schema(name, permissions: row[1].text, indexes: row[2].text, fields: byClass[name] ?? [])))
        }
        return ["results": .array(results)]
    }

    /// One class's schema; 103 when it does not exist.
    public func get(_ className: String, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        guard let schema = try await load(className, on: db) else { throw ParseError.invalidClassName("Class \(className) does not exist.") }
        return schema
    }

    /// `POST /schemas[/:className]`: creates a class with `fields`, `classLevelPermissions` and
    /// `indexes`; answers its schema.
    public func create(pathClassName: String?, body: JSONObject) async throws(ParseError) -> JSONObject {
        let bodyName = try Self.bodyClassName(body)
        if let pathClassName, let bodyName, pathClassName != bodyName {
            throw ParseError.invalidClassName("Class name mismatch between \(bodyName) and \(pathClassName).")
        }
        guard let className = pathClassName ?? bodyName else { throw ParseError.missingRequiredField("POST /schemas needs a class name.") }
        let changes = try Self.changes(body)
        try await transaction { tx throws(ParseError) in
            if try await tx.run("SELECT 1 FROM parse_classes WHERE class_name = $1", [.text(className)]).first != nil {
                throw ParseError.invalidClassName("Class \(className) already exists.")
            }
            guard ClassName.isValid(className) else { throw ClassSchema.invalidClassName(className) }
            let existing = try await self.storedFields(className, on: tx)
            let added = try Self.declarations(changes.fields, className: className, existing: existing, deleting: [])
            var fields = existing.mapValues(\.type)
            for field in added { fields[field.name] = field.type }
            let permissions = try changes.permissions.map { value throws(ParseError) in try ClassLevelPermissions(validating: value, fields: fields) }
            _ = try await tx.run("INSERT INTO parse_classes (class_name, permissions) VALUES ($1, $2::jsonb)",
                                 [.text(className), permissions.map { .json(JSONValue.object($0.stored ?? [:]).serialized()) } ?? .null]) { error in
                error.isUniqueViolation ? ParseError.invalidClassName("Class \(className) already exists.") : nil
            }
            try await Self.insert(added, className: className, on: tx)
            try await Self.applyIndexes(changes.indexes, className: className, existing: [:], fields: fields, on: tx)
            try await self.events.publish(.schemaChanged(className: className), on: tx)
        }
        schemas.invalidate(className: className)
        return try await get(className, on: database)
    }

    /// `PUT /schemas/:className`: adds and deletes (`{"__op":"Delete"}`) fields and indexes and
    /// replaces the permissions when given; answers the schema.
    public func update(_ className: String, body: JSONObject) async throws(ParseError) -> JSONObject {
        if let bodyName = try Self.bodyClassName(body), bodyName != className {
            throw ParseError.invalidClassName("Class name mismatch between \(bodyName) and \(className).")
        }
        let changes = try Self.changes(body)
        try await transaction { tx throws(ParseError) in
            let rows = try await tx.run("SELECT indexes::text FROM parse_classes WHERE class_name = $1 FOR UPDATE", [.text(className)])
            guard let row = rows.first else { throw ParseError.invalidClassName("Class \(className) does not exist.") }
            let existing = try await self.storedFields(className, on: tx)
            let defaults = ClassSchema.defaultFields(className)
            var deleting: [String] = []
            for (name, value) in changes.fields {
                let isDelete = value["__op"]?.string == "Delete"
                let exists = existing[name] != nil || defaults[name] != nil
                if exists && !isDelete { throw ParseError.schemaConflict("Field \(name) exists, cannot update.") }
                if !exists && isDelete { throw ParseError.schemaConflict("Field \(name) does not exist, cannot delete.") }
                if isDelete {
                    guard ClassSchema.isValidFieldName(name) else { throw ParseError.invalidKeyName("invalid field name: \(name)") }
                    guard defaults[name] == nil else { throw ParseError.changedImmutableField("field \(name) cannot be changed") }
                    deleting.append(name)
                }
            }
            let added = try Self.declarations(JSONObject(changes.fields.filter { $0.value["__op"]?.string != "Delete" }.map { ($0.key, $0.value) }), className: className,
                                              existing: existing, deleting: deleting)
            var fields = existing.mapValues(\.type)
            for name in deleting { fields.removeValue(forKey: name) }
            for field in added { fields[field.name] = field.type }
            if !deleting.isEmpty {
                _ = try await tx.run("DELETE FROM class_schemas WHERE class_name = $1 AND field = ANY($2::text[])", [.text(className), .textArray(deleting)])
                // Parse drops the column: the values go with it (and the mirrored GeoPoint).
                let geo = deleting.contains { existing[$0]?.type == .geoPoint }
                _ = try await tx.run("UPDATE objects SET data = data - $2::text[]\(geo ? ", geo = NULL" : "") WHERE class_name = $1 AND data ?| $2::text[]",
                                     [.text(className), .textArray(deleting)])
                // A Relation's links go too (its join table stays, empty, as Parley creates join tables once).
                for name in deleting {
                    guard case .relation = existing[name]?.type else { continue }
                    _ = try await tx.run("SELECT parley_relation_clear($1)", [.text(RelationWriter.joinTable(field: name, className: className))])
                }
            }
            try await Self.insert(added, className: className, on: tx)
            if let value = changes.permissions {
                let permissions = try ClassLevelPermissions(validating: value, fields: fields)
                _ = try await tx.run("UPDATE parse_classes SET permissions = $2::jsonb WHERE class_name = $1",
                                     [.text(className), .json(JSONValue.object(permissions.stored ?? [:]).serialized())])
            }
            let stored = Self.parseObject(row[0].text)
            try await Self.applyIndexes(changes.indexes, className: className, existing: stored, fields: fields, on: tx)
            try await self.events.publish(.schemaChanged(className: className), on: tx)
        }
        schemas.invalidate(className: className)
        return try await get(className, on: database)
    }

    /// `DELETE /schemas/:className`: drops an empty class (255 when it has objects); a class that
    /// does not exist is no error, as Parse Server.
    public func delete(_ className: String) async throws(ParseError) {
        guard ClassSchema.isValidClassName(className) else { throw ClassSchema.invalidClassName(className) }
        try await transaction { tx throws(ParseError) in
            let table = switch className {
            case ClassName.user: "users"
            case ClassName.session: "sessions"
            case ClassName.installation: "installations"
            default: "objects"
            }
            let filter = table == "objects" ? " WHERE class_name = $1" : ""
            let count = try await tx.run("SELECT count(*) FROM \(table)\(filter)", table == "objects" ? [.text(className)] : []).first?[0].int ?? 0
            if count > 0 {
                throw ParseError.schemaConflict("Class \(className) is not empty, contains \(count) objects, cannot drop schema.")
            }
            let rows = try await tx.run("DELETE FROM parse_classes WHERE class_name = $1 RETURNING indexes::text", [.text(className)])
            for (_, index) in Self.parseObject(rows.first?[0].text) {
                if let name = index["index"]?.string { _ = try await tx.run("DROP INDEX IF EXISTS \(Self.quoted(name))", []) }
            }
            _ = try await tx.run("DELETE FROM class_schemas WHERE class_name = $1", [.text(className)])
            // The system classes always exist (Parse Server recreates them at start).
            if ClassName.isSystem(className) {
                _ = try await tx.run("INSERT INTO parse_classes (class_name) VALUES ($1)", [.text(className)])
            }
            try await self.events.publish(.schemaChanged(className: className), on: tx)
        }
        schemas.invalidate(className: className)
    }

    // MARK: Reading

    private func load(_ className: String, on db: any SQLExecutor) async throws(ParseError) -> JSONObject? {
        let rows = try await db.run("SELECT permissions::text, indexes::text FROM parse_classes WHERE class_name = $1", [.text(className)], readOnly: true)
        guard let row = rows.first else { return nil }
        let fields = try await db.run("SELECT class_name, field, type, target_class, required, default_value::text FROM class_schemas WHERE class_name = $1 ORDER BY field",
                                      [.text(className)], readOnly: true)
        return Self.schema(className, permissions: row[0].text, indexes: row[1].text, fields: Array(fields))
    }

    private struct StoredField {
        var type: ParseFieldType
    }

    private func storedFields(_ className: String, on db: any SQLExecutor) async throws(ParseError) -> [String: StoredField] {
        var fields: [String: StoredField] = [:]
        for (name, type) in try await schemas.fields(className: className, on: db) { fields[name] = StoredField(type: type) }
        return fields
    }

    /// A schema in Parse's shape: `className`, `fields` (defaults first), `classLevelPermissions`,
    /// `indexes` (`_id_` always, as Parse Server on PostgreSQL lists it).
    private static func schema(_ className: String, permissions: String?, indexes: String?, fields rows: [PostgresRow]) -> JSONObject {
        var fields = ClassSchema.defaultFields(className)
        for row in rows {
            guard let name = row[1].text, let typeName = row[2].text, fields[name] == nil,
                  let type = ParseFieldType(name: typeName, targetClass: row[3].text) else { continue }
            let defaultValue = row[5].text.flatMap { try? JSONParser(maxBytes: 1 << 20).parse($0) }
            fields[name] = ClassSchema.json(type: type, required: row[4].bool ?? false, defaultValue: defaultValue)
        }
        var indexList: JSONObject = ["_id_": ["_id": 1]]
        for (name, index) in parseObject(indexes) { indexList[name] = index["fields"] ?? .object([:]) }
        return ["className": .string(className), "fields": .object(fields),
                "classLevelPermissions": .object(SchemaStore.decodePermissions(permissions).json), "indexes": .object(indexList)]
    }

    // MARK: Validation

    private struct Changes {
        var fields: JSONObject = [:]
        var permissions: JSONValue?
        var indexes: JSONObject = [:]
    }

    private static func bodyClassName(_ body: JSONObject) throws(ParseError) -> String? {
        guard let value = body["className"], !value.isNull else { return nil }
        guard let name = value.string else { throw ParseError.invalidJSON("className must be a string") }
        return name
    }

    private static func changes(_ body: JSONObject) throws(ParseError) -> Changes {
        var changes = Changes()
        if let fields = body["fields"], !fields.isNull {
            guard let object = fields.object else { throw ParseError.invalidJSON("fields must be an object") }
            guard object.count <= ClassSchema.maxFields else { throw ParseError.objectTooLarge("a class has at most \(ClassSchema.maxFields) fields") }
            changes.fields = object
        }
        if let permissions = body["classLevelPermissions"], !permissions.isNull { changes.permissions = permissions }
        if let indexes = body["indexes"], !indexes.isNull {
            guard let object = indexes.object else { throw ParseError.invalidJSON("indexes must be an object") }
            changes.indexes = object
        }
        return changes
    }

    /// The declared new fields, checked as `validateSchemaData`: names (105, 136), types and
    /// options, one GeoPoint per class (111), at most `maxFields` in all (116).
    private static func declarations(_ submitted: JSONObject, className: String, existing: [String: StoredField], deleting: [String]) throws(ParseError) -> [FieldDeclaration] {
        let defaults = ClassSchema.defaultFields(className)
        var added: [FieldDeclaration] = []
        for (name, value) in submitted where existing[name] == nil || deleting.contains(name) {
            guard ClassSchema.isValidFieldName(name) else { throw ParseError.invalidKeyName("invalid field name: \(name)") }
            guard defaults[name] == nil else { throw ParseError.changedImmutableField("field \(name) cannot be added") }
            added.append(try ClassSchema.field(name, value, className: className))
        }
        let remaining = existing.filter { !deleting.contains($0.key) }
        guard remaining.count + added.count <= ClassSchema.maxFields else {
            throw ParseError.objectTooLarge("a class has at most \(ClassSchema.maxFields) fields")
        }
        let geoPoints = remaining.filter { $0.value.type == .geoPoint }.map(\.key) + added.filter { $0.type == .geoPoint }.map(\.name)
        if geoPoints.count > 1 {
            throw ParseError.incorrectType("currently, only one GeoPoint field may exist in an object. Adding \(geoPoints[1]) when \(geoPoints[0]) already exists.")
        }
        return added
    }

    private static func insert(_ fields: [FieldDeclaration], className: String, on tx: any SQLExecutor) async throws(ParseError) {
        for field in fields {
            _ = try await tx.run("""
                INSERT INTO class_schemas (class_name, field, type, target_class, required, default_value) VALUES ($1, $2, $3, $4, $5, $6::jsonb)
                """, [.text(className), .text(field.name), .text(field.type.name), field.type.targetClass.map(PostgresData.text) ?? .null,
                      .bool(field.required), field.defaultValue.map { .json($0.serialized()) } ?? .null]) { error in
                error.isUniqueViolation ? ParseError.incorrectType("there can only be one GeoPoint field in a class") : nil
            }
        }
    }

    /// Adds and drops indexes as Parse Server's `setIndexesWithSchemaFormat`: 102 for an index
    /// that exists (or not, for a delete), a field the class lacks, or `_id_`.
    private static func applyIndexes(_ submitted: JSONObject, className: String, existing: JSONObject, fields: [String: ParseFieldType],
                                     on tx: any SQLExecutor) async throws(ParseError) {
        guard !submitted.isEmpty else { return }
        var indexes = existing
        for (name, value) in submitted {
            let isDelete = value["__op"]?.string == "Delete"
            let exists = name == "_id_" || indexes[name] != nil
            if exists && !isDelete { throw ParseError.invalidQuery("Index \(name) exists, cannot update.") }
            if !exists && isDelete { throw ParseError.invalidQuery("Index \(name) does not exist, cannot delete.") }
            if name == "_id_" { throw ParseError.invalidQuery("Cannot delete _id_ index.") }
            if isDelete {
                if let index = indexes[name]?["index"]?.string { _ = try await tx.run("DROP INDEX IF EXISTS \(quoted(index))", []) }
                indexes.removeValue(forKey: name)
                continue
            }
            guard !name.isEmpty, name.utf8.count <= 128 else { throw ParseError.invalidQuery("invalid index name: \(name)") }
            guard let keys = value.object, !keys.isEmpty, keys.count <= 32 else { throw ParseError.invalidQuery("Index \(name) must name at least one field.") }
            var columns: [String] = []
            for (field, direction) in keys {
                guard fields[field] != nil || ClassSchema.defaultFields(className)[field] != nil else {
                    throw ParseError.invalidQuery("Field \(field) does not exist, cannot add index.")
                }
                guard let order = direction.int, order == 1 || order == -1 else {
                    throw ParseError.invalidQuery("Index \(name) on \(field): Parley indexes fields ascending (1) or descending (-1)")
                }
                let column = switch field {
                case "objectId": "object_id"
                case "createdAt": "created_at"
                case "updatedAt": "updated_at"
                // A validated field name (letters, digits, `_`): safe in a literal.
                default: "(data -> '\(field)')"
                }
                columns.append(column + (order == -1 ? " DESC" : ""))
            }
            guard className != ClassName.user, className != ClassName.session, className != ClassName.installation else {
                throw ParseError.invalidQuery("Parley keeps \(className) in its own table: indexes on it are not supported")
            }
            let index = "objects_class_" + RandomID.objectID().lowercased() + RandomID.objectID().lowercased()
            // DDL takes no parameters: the class name is validated (letters, digits, `_`).
            _ = try await tx.run("CREATE INDEX \(quoted(index)) ON objects (\(columns.joined(separator: ", "))) WHERE class_name = '\(className)'", [])
            indexes[name] = ["fields": value, "index": .string(index)]
        }
        guard indexes.count <= ClassSchema.maxIndexes else { throw ParseError.objectTooLarge("a class has at most \(ClassSchema.maxIndexes) indexes") }
        _ = try await tx.run("UPDATE parse_classes SET indexes = $2::jsonb WHERE class_name = $1",
                             [.text(className), .json(JSONValue.object(indexes).serialized())]) { error in
            error.sqlState == "23514" ? ParseError.objectTooLarge("the indexes of a class are limited to 64 KiB") : nil
        }
    }

    /// An index name this editor made (lowercase letters, digits, `_`), quoted.
    private static func quoted(_ identifier: String) -> String {
        "\"" + String(identifier.unicodeScalars.filter { $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" }) + "\""
    }

    private static func parseObject(_ text: String?) -> JSONObject {
        guard let text else { return [:] }
        return (try? JSONParser(maxBytes: 1 << 20).parse(text))?.object ?? [:]
    }

    private func transaction(_ body: @Sendable (PostgresTransaction) async throws(ParseError) -> Void) async throws(ParseError) {
        do {
            try await database.transaction { tx in try await body(tx) }
        } catch let error as ParseError {
            throw error
        } catch let error as PostgresError {
            throw ParseError.database(error)
        } catch {
            throw ParseError.internalError("\(error)")
        }
    }
}
