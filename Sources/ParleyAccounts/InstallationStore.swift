import ParleyJSON
import ParleyLog
import ParleyPostgres

/// `_Installation`: devices of users (push tokens), upserted by `installationId`.
///
/// An installation linked to a user is that user's: only a session of the user or the master key
/// may change it, and only they see its tokens (`ownedBy`; `RowJSON` writes the tokens). One that no user is
/// linked to yet may be saved by anyone, and is linked to the user of the first session that does.
public struct InstallationStore: Sendable {
    let schemas: SchemaStore

    static let coreFields: Set<String> = ["installationId", "deviceType", "deviceToken", "voipDeviceToken", "user"]
    static let columns = "object_id, installation_id, device_type, device_token, voip_device_token, user_id, acl, data, created_at, updated_at"

    /// Whether a create inserted a row (201) or updated the one with the same installationId (200).
    public struct SaveResult: Sendable {
        public let created: Bool
        public let json: JSONObject
    }

    private struct Core {
        var installationId: String?
        var deviceType: String?
        var deviceToken: String??
        var voipDeviceToken: String??
    }

    private static func core(_ plan: WritePlan) throws(ParseError) -> Core {
        var core = Core()
        func text(_ name: String) throws(ParseError) -> String?? {
            guard let value = plan.core[name] else { return .none }
            if value.isNull { return .some(nil) }
            guard let string = value.string, string.utf8.count <= 4096, !string.utf8.contains(0) else { throw .incorrectType("\(name) must be a string") }
            return .some(string)
        }
        if let id = try text("installationId") {
            guard let id, !id.isEmpty, id.utf8.count <= 256 else { throw .incorrectType("installationId must be a non-empty string") }
            core.installationId = id
        }
        // Any string, as Parse Server (ios, android, osx, tvos, win, web, embedded, …); pushes go
        // only to the kinds the push layer sends (migrations/0006_push.sql).
        if let type = try text("deviceType") {
            guard let type, !type.isEmpty else { throw .incorrectType("deviceType must be a non-empty string") }
            core.deviceType = type
        }
        core.deviceToken = try text("deviceToken")
        core.voipDeviceToken = try text("voipDeviceToken")
        return core
    }

    /// ` AND <column> …`: the installation is the caller's to change (master: always; a session:
    /// linked to no user or to the session's user; no session: linked to no user).
    static func ownedBy(_ auth: Auth, column: String, builder: inout SQLBuilder) -> String {
        if auth.isMaster { return "" }
        guard let userId = auth.userId else { return " AND \(column) IS NULL" }
        return " AND (\(column) IS NULL OR \(column) = \(builder.bind(.text(userId))))"
    }

    /// A write that would give the user more devices than the realtime layer allows (its trigger
    /// on `installations` raises PR001, migrations/0009_realtime_devices_contacts.sql).
    static func deviceLimit(_ error: PostgresError) -> ParseError? {
        error.sqlState == "PR001" ? .operationForbidden("this user has the maximum number of devices") : nil
    }

    /// POST /installations: inserts, or updates the row with the same installationId (Parse's
    /// upsert) when the caller may change it (101 otherwise, like an ACL refusal). The caller's
    /// session user becomes the installation's user.
    public func save(body: JSONObject, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> SaveResult {
        let plan = try WritePlan(body: body, isCreate: true, coreFields: Self.coreFields)
        let core = try Self.core(plan)
        guard let installationId = core.installationId ?? auth.installationId else {
            throw ParseError.missingRequiredField("at least one ID field (deviceToken, installationId) must be specified in this operation")
        }
        guard let deviceType = core.deviceType else { throw ParseError.missingRequiredField("deviceType must be specified in this operation") }
        try await schemas.resolve(className: ClassName.installation, record: plan.fieldTypes, on: db)
        let acl: ACL? = plan.acl ?? nil
        let (readers, writers) = ACLSQL.permissions(acl)
        let now = UTCTime.nowMilliseconds()
        let objectId = RandomID.objectID()
        var builder = SQLBuilder()
        let userId: PostgresData = auth.userId.map(PostgresData.text) ?? .null
        let sql = """
            INSERT INTO installations AS i (object_id, installation_id, device_type, device_token, voip_device_token, user_id, acl, rperm, wperm, data, created_at, updated_at)
            VALUES (\(builder.bind(.text(objectId))), \(builder.bind(.text(installationId))), \(builder.bind(.text(deviceType))), \
            \(builder.bind((core.deviceToken ?? nil).map(PostgresData.text) ?? .null)), \(builder.bind((core.voipDeviceToken ?? nil).map(PostgresData.text) ?? .null)), \
            \(builder.bind(userId)), \(builder.bind(acl.map { .json(JSONValue.object($0.json).serialized()) } ?? .null))::jsonb, \
            \(builder.bind(.textArray(readers))), \(builder.bind(.textArray(writers))), \
            \(builder.bind(.json(JSONValue.object(plan.initialData()).serialized()))), \(builder.bind(.timestamp(milliseconds: now))), \(builder.bind(.timestamp(milliseconds: now))))
            ON CONFLICT (installation_id) DO UPDATE SET
                device_type = EXCLUDED.device_type,
                \(core.deviceToken != nil ? "device_token = EXCLUDED.device_token," : "")
                \(core.voipDeviceToken != nil ? "voip_device_token = EXCLUDED.voip_device_token," : "")
                \(plan.acl != nil ? "acl = EXCLUDED.acl, rperm = EXCLUDED.rperm, wperm = EXCLUDED.wperm," : "")
                user_id = COALESCE(EXCLUDED.user_id, i.user_id),
                data = \(plan.touchesData ? plan.dataExpression(column: "i.data", builder: &builder) : "i.data"),
                updated_at = EXCLUDED.updated_at
            WHERE true\(ACLSQL.filter("i.wperm", auth: auth, builder: &builder))\(Self.ownedBy(auth, column: "i.user_id", builder: &builder))
            RETURNING object_id, created_at, (xmax = 0) AS inserted
            """
        guard let row = try await db.run(sql, builder.params, mapping: Self.deviceLimit).first, let id = row["object_id"].string else { throw ParseError.objectNotFound }
        let created = row["inserted"].bool ?? false
        var json: JSONObject = ["objectId": .string(id)]
        if created {
            json["createdAt"] = .string(UTCTime.iso8601(milliseconds: now))
        } else {
            json["updatedAt"] = .string(UTCTime.iso8601(milliseconds: now))
        }
        return SaveResult(created: created, json: json)
    }

    /// PUT /installations/:id, when the caller may change it (101 otherwise). installationId may
    /// not change (136 in Parse; 111 here).
    public func update(objectId: String, body: JSONObject, auth: Auth, pointerFields: [String] = [], on db: any SQLExecutor) async throws(ParseError) -> JSONObject {
        let plan = try WritePlan(body: body, isCreate: false, coreFields: Self.coreFields)
        let core = try Self.core(plan)
        try await schemas.resolve(className: ClassName.installation, record: plan.fieldTypes, on: db)
        var builder = SQLBuilder()
        var assignments: [String] = []
        if let id = core.installationId { assignments.append("installation_id = CASE WHEN installation_id = \(builder.bind(.text(id))) THEN installation_id ELSE NULL END") }
        if let type = core.deviceType { assignments.append("device_type = \(builder.bind(.text(type)))") }
        if let token = core.deviceToken { assignments.append("device_token = \(builder.bind(token.map(PostgresData.text) ?? .null))") }
        if let token = core.voipDeviceToken { assignments.append("voip_device_token = \(builder.bind(token.map(PostgresData.text) ?? .null))") }
        if let userId = auth.userId { assignments.append("user_id = \(builder.bind(.text(userId)))") }
        if case .some(let acl) = plan.acl { assignments.append(ACLSQL.assignments(acl, builder: &builder)) }
        if plan.touchesData { assignments.append("data = \(plan.dataExpression(column: "data", builder: &builder))") }
        let now = UTCTime.nowMilliseconds()
        assignments.append("updated_at = \(builder.bind(.timestamp(milliseconds: now)))")
        let sql = "UPDATE installations SET \(assignments.joined(separator: ", ")) WHERE object_id = \(builder.bind(.text(objectId)))"
            + ACLSQL.filter("wperm", auth: auth, builder: &builder) + Self.ownedBy(auth, column: "user_id", builder: &builder)
            + ACLSQL.pointerFilter(pointerFields, auth: auth, builder: &builder, columns: Self.pointerColumns) + " RETURNING data"
        let rows = try await db.run(sql, builder.params) { error in
            error.sqlState == "23502" ? ParseError.incorrectType("installationId may not be changed in this operation") : Self.deviceLimit(error)
        }
        guard let row = rows.first else { throw ParseError.objectNotFound }
        return plan.updateResponse(row, now: now)
    }

    /// One installation as JSON, if readable by `auth` (its tokens only for its user or the master key).
    /// The typed `_User` pointer columns, for pointer permissions.
    static let pointerColumns = ["user": "user_id"]

    /// `pointerFields`: the class-level pointer permissions, one of which must name the reader.
    public func get(objectId: String, auth: Auth, pointerFields: [String] = [], keys: [String]? = nil, relations: [SchemaStore.RelationField] = [],
                    on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        var builder = SQLBuilder()
        let sql = "SELECT \(Self.columns) FROM installations WHERE object_id = \(builder.bind(.text(objectId)))" + ACLSQL.filter("rperm", auth: auth, builder: &builder)
            + ACLSQL.pointerFilter(pointerFields, auth: auth, builder: &builder, columns: Self.pointerColumns)
        let rows = try await db.run(sql, builder.params, readOnly: true)
        guard let installation = RowJSON.object(.installation, rows, viewer: auth, keys: keys, relations: relations) else { throw ParseError.objectNotFound }
        return installation
    }

    /// Deletes an installation (master only, as Parse).
    public func delete(objectId: String, auth: Auth, on db: any SQLExecutor) async throws(ParseError) {
        guard auth.isMaster else {
            throw ParseError.operationForbidden("Clients aren't allowed to perform the delete operation on the installation collection.")
        }
        guard !(try await db.run("DELETE FROM installations WHERE object_id = $1 RETURNING object_id", [.text(objectId)])).isEmpty else {
            throw ParseError.objectNotFound("Object not found for delete.")
        }
    }
}
