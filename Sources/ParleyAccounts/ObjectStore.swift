import ParleyJSON
import ParleyLog
import ParleyPostgres

/// Objects of user-defined classes (`objects` table): create, get, update with field operations,
/// delete; ACLs enforced in SQL unless master.
public struct ObjectStore: Sendable {
    let schemas: SchemaStore

    static let columns = "object_id, acl, data, created_at, updated_at"
    /// The constraint an objectId collision violates (any other unique index: 137).
    static let primaryKey = "objects_pkey"

    /// 103 unless `className` is a valid user-defined class name or `_Role`.
    public static func validate(className: String) throws(ParseError) {
        guard ClassName.isValid(className) || className == ClassName.role else {
            throw ParseError.invalidClassName("Invalid classname: \(className), classnames can only have alphanumeric characters and _, and must start with an alpha character ")
        }
    }

    /// Creates an object: returns `{objectId, createdAt}`. The class's field defaults fill what
    /// `body` leaves out, its required fields must be set (142), and `access` may refuse new
    /// fields (`addField`). The first object of a class creates it.
    public func create(className: String, body: JSONObject, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        try Self.validate(className: className)
        var body = body
        if let info = try await schemas.classInfo(of: className, on: db) {
            for (field, value) in info.defaults where body[field] == nil || body[field]?.isNull == true || body[field]?["__op"]?.string == "Delete" {
                body[field] = value
            }
            for field in info.required where body[field] == nil || body[field]?.isNull == true || body[field]?["__op"]?.string == "Delete" {
                throw ParseError.validationFailed("\(field) is required")
            }
        }
        let plan = try WritePlan(body: body, isCreate: true)
        try await schemas.checkNewFields(className: className, plan.fieldTypes.map(\.field), addField: access.addField, on: db)
        try await schemas.registerClass(className, on: db)
        try await schemas.resolve(className: className, record: plan.fieldTypes, on: db)
        let acl: ACL? = plan.acl ?? nil
        let (readers, writers) = ACLSQL.permissions(acl)
        let now = UTCTime.nowMilliseconds()
        for attempt in 0..<3 {
            let objectId = RandomID.objectID()
            var builder = SQLBuilder()
            let geo = plan.geoPoint.map { ACLSQL.geo(latitude: $0.latitude, longitude: $0.longitude, builder: &builder) } ?? "NULL"
            let sql = """
                INSERT INTO objects (class_name, object_id, acl, rperm, wperm, data, geo, created_at, updated_at)
                VALUES (\(builder.bind(.text(className))), \(builder.bind(.text(objectId))), \
                \(builder.bind(acl.map { .json(JSONValue.object($0.json).serialized()) } ?? .null))::jsonb, \
                \(builder.bind(.textArray(readers))), \(builder.bind(.textArray(writers))), \
                \(builder.bind(.json(JSONValue.object(plan.initialData()).serialized()))), \(geo), \
                \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
                """
            do {
                _ = try await db.query(sql, builder.params)
            } catch {
                if error.isUniqueViolation && error.constraint != Self.primaryKey {
                    throw ParseError.duplicateValue("A duplicate value for a field with unique values was provided")
                }
                if error.isUniqueViolation && attempt < 2 { continue }
                throw ParseError.database(error)
            }
            return ["objectId": .string(objectId), "createdAt": .string(UTCTime.iso8601(milliseconds: now))]
        }
        throw ParseError.internalError("could not allocate a unique objectId")
    }

    /// One object as JSON, if readable by `auth` (and by `access`'s pointer permissions, without
    /// its protected fields); 101 otherwise.
    public func get(className: String, objectId: String, auth: Auth, access: ClassAccess = .unrestricted, keys: [String]? = nil,
                    on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        try Self.validate(className: className)
        var builder = SQLBuilder()
        let sql = "SELECT \(Self.columns) FROM objects WHERE class_name = \(builder.bind(.text(className))) AND object_id = \(builder.bind(.text(objectId)))"
            + ACLSQL.filter("rperm", auth: auth, builder: &builder) + ACLSQL.pointerFilter(access.pointerFields, auth: auth, builder: &builder)
        let rows = try await db.run(sql, builder.params, readOnly: true)
        let relations = rows.isEmpty ? [] : try await schemas.relationFields(className: className, on: db)
        guard let object = RowJSON.object(.object, rows, viewer: auth, keys: keys, relations: relations, hidden: access.protectedFields,
                                            userFields: access.userFieldProtections) else {
            throw ParseError.objectNotFound
        }
        return object
    }

    /// Applies an update body atomically (one UPDATE; operations are jsonb expressions on the
    /// current row). 101 when missing or not writable. Returns `{updatedAt}` plus operation results.
    public func update(className: String, objectId: String, body: JSONObject, auth: Auth, access: ClassAccess = .unrestricted,
                       on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        try Self.validate(className: className)
        if let info = try await schemas.classInfo(of: className, on: db) {
            for field in info.required where body[field]?.isNull == true || body[field]?["__op"]?.string == "Delete" {
                throw ParseError.validationFailed("\(field) is required")
            }
        }
        let plan = try WritePlan(body: body, isCreate: false)
        let adding = try await schemas.checkNewFields(className: className, plan.fieldTypes.map(\.field), addField: access.addField, on: db)
        let types = try await schemas.resolve(className: className, record: plan.fieldTypes, lookup: plan.clearedFields, on: db)
        var builder = SQLBuilder()
        var assignments: [String] = []
        if case .some(let acl) = plan.acl {
            assignments.append(ACLSQL.assignments(acl, builder: &builder))
        }
        let now = UTCTime.nowMilliseconds()
        assignments += plan.updateAssignments(types: types, now: now, builder: &builder)
        let sql = "UPDATE objects SET \(assignments.joined(separator: ", ")) WHERE class_name = \(builder.bind(.text(className))) AND object_id = \(builder.bind(.text(objectId)))"
            + ACLSQL.filter("wperm", auth: auth, builder: &builder) + ACLSQL.pointerFilter(access.pointerFields, auth: auth, builder: &builder)
            + ACLSQL.pointerFilter(adding, auth: auth, builder: &builder) + " RETURNING data"
        guard let row = try await db.run(sql, builder.params).first else { throw ParseError.objectNotFound }
        return plan.updateResponse(row, now: now)
    }

    /// Deletes an object if writable by `auth` (and by `access`'s pointer permissions); 101 otherwise.
    public func delete(className: String, objectId: String, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) {
        try Self.validate(className: className)
        var builder = SQLBuilder()
        let sql = "DELETE FROM objects WHERE class_name = \(builder.bind(.text(className))) AND object_id = \(builder.bind(.text(objectId)))"
            + ACLSQL.filter("wperm", auth: auth, builder: &builder) + ACLSQL.pointerFilter(access.pointerFields, auth: auth, builder: &builder)
            + " RETURNING object_id"
        guard !(try await db.run(sql, builder.params)).isEmpty else { throw ParseError.objectNotFound("Object not found for delete.") }
    }
}
