import ParleyJSON
import ParleyLog
import ParleyPostgres

/// Writes rows of `users`, `objects`, `installations` and `sessions` as Parse JSON straight into
/// a byte buffer: the one row serializer, used by finds, single-object reads, `me` and login.
///
/// Rows are never built as objects first: finds are the hottest read path, and building an
/// object per row (then an array of them, then serializing it all) cost more than the query
/// itself. The `data` members are copied from PostgreSQL's `jsonb` text with only its whitespace
/// dropped, so numbers keep PostgreSQL's spelling (`2.0`, `1E+2` written `100`) and strings its
/// escapes. The members come in a fixed order: the kind's typed members first, then the `data`
/// members they do not shadow, then `createdAt`, `updatedAt` and `ACL`, which replace a
/// same-named `data` member in place.
struct RowJSON {
    /// Which table a row comes from.
    enum Kind {
        case user, object, installation, session

        init(className: String) {
            switch className {
            case ClassName.user: self = .user
            case ClassName.installation: self = .installation
            case ClassName.session: self = .session
            default: self = .object
            }
        }
    }

    private let kind: Kind
    /// Who reads: `email` and `authData` only for the user itself or the master key.
    private let viewer: Auth
    /// With a `keys` list: those keys plus the members Parse always returns. Nil: every member.
    private let wanted: Set<String>?
    /// Fields class-level permissions hide from the viewer (`protectedFields`); a user reading
    /// its own `_User` row sees them.
    private var hidden: Set<String>
    /// `protectedFields` `userField:` entries, decided per row from its `data`.
    private var userFields: [ClassAccess.UserFieldProtection]
    /// Positions of the columns read, resolved once for every row of a result.
    private let objectID, createdAt, updatedAt, acl, data: Int?
    private let username, email, emailVerified, authData: Int?
    private let installationID, deviceType, deviceToken, voipDeviceToken, userID: Int?
    private let token, createdWith, restricted, expiresAt: Int?

    private static let columnNames = PostgresColumnNames([
        "object_id", "created_at", "updated_at", "acl", "data", "username", "email", "email_verified",
        "installation_id", "device_type", "device_token", "voip_device_token", "user_id",
        "token", "created_with", "restricted", "expires_at", "auth_data",
    ])

    /// `,"<field>":{"__type":"Relation","className":…}` for each Relation field of the class
    /// (`keys` permitting), written at each object's end, as Parse Server answers them.
    private let relationMembers: [UInt8]

    /// Members every row keeps whatever `keys` says.
    private static let alwaysReturned: Set<String> = ["objectId", "createdAt", "updatedAt", "ACL", "sessionToken"]

    init(_ kind: Kind, columns: PostgresColumns, viewer: Auth, keys: [String]? = nil, relations: [SchemaStore.RelationField] = [], hidden: [String] = [],
         userFields: [ClassAccess.UserFieldProtection] = []) {
        self.kind = kind
        self.viewer = viewer
        self.hidden = Set(hidden)
        self.userFields = hidden.isEmpty ? [] : userFields
        let wanted = keys.map { Set($0).union(Self.alwaysReturned) }
        self.wanted = wanted
        var members: [UInt8] = []
        for relation in relations where (wanted?.contains(relation.field) ?? true) && !hidden.contains(relation.field) {
            members.append(UInt8(ascii: ","))
            JSONSerializer.writeString(relation.field, into: &members)
            members.append(contentsOf: #":{"__type":"Relation","className":"#.utf8)
            JSONSerializer.writeString(relation.targetClass, into: &members)
            members.append(UInt8(ascii: "}"))
        }
        relationMembers = members
        let positions = columns.positions(of: Self.columnNames)
        objectID = positions[0]
        createdAt = positions[1]
        updatedAt = positions[2]
        acl = positions[3]
        data = positions[4]
        username = positions[5]
        email = positions[6]
        emailVerified = positions[7]
        installationID = positions[8]
        deviceType = positions[9]
        deviceToken = positions[10]
        voipDeviceToken = positions[11]
        userID = positions[12]
        token = positions[13]
        createdWith = positions[14]
        restricted = positions[15]
        expiresAt = positions[16]
        authData = positions[17]
    }

    /// The first row as a JSON object for `viewer`, reduced to `keys` when given; nil without rows.
    static func object(_ kind: Kind, _ rows: PostgresRows, viewer: Auth, keys: [String]? = nil, relations: [SchemaStore.RelationField] = [],
                       hidden: [String] = [], userFields: [ClassAccess.UserFieldProtection] = []) -> [UInt8]? {
        guard let row = rows.first else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        RowJSON(kind, columns: rows.columns, viewer: viewer, keys: keys, relations: relations, hidden: hidden, userFields: userFields).write(row, into: &bytes)
        return bytes
    }

    /// A find's response body: `{"results":[…]}` plus `"count"` when counted (`rows` nil when
    /// `limit` was 0).
    static func results(_ kind: Kind, _ rows: PostgresRows?, count: Int?, viewer: Auth, keys: [String]?,
                        relations: [SchemaStore.RelationField] = [], hidden: [String] = [], userFields: [ClassAccess.UserFieldProtection] = []) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + (rows?.count ?? 0) * 512)
        bytes.append(#"{"results":["#)
        if let rows, !rows.isEmpty {
            let writer = RowJSON(kind, columns: rows.columns, viewer: viewer, keys: keys, relations: relations, hidden: hidden, userFields: userFields)
            for (position, row) in rows.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                writer.write(row, into: &bytes)
            }
        }
        bytes.append(UInt8(ascii: "]"))
        if let count {
            bytes.append(#","count":"#)
            JSONValue.int(Int64(count)).serialize(into: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Writes one row as a JSON object.
    func write(_ row: PostgresRow, into bytes: inout [UInt8]) {
        let objectIdCell = cell(row, objectID)
        if !hidden.isEmpty, kind == .user, Self.cell(objectIdCell, equals: viewer.userId) {
            var own = self
            own.hidden = []
            own.userFields = []
            return own.write(row, into: &bytes)
        }
        if !userFields.isEmpty, let userId = viewer.userId {
            var own = self
            own.userFields = []
            own.hidden = Self.hidden(hidden, userFields, row: cell(row, data), userId: userId)
            return own.write(row, into: &bytes)
        }
        bytes.append(#"{"objectId":"#)
        Self.appendString(objectIdCell, to: &bytes)
        switch kind {
        case .user: writeUser(row, objectId: objectIdCell, into: &bytes)
        case .object: writeDataAndMetadata(row, into: &bytes) { Self.equals($0, "objectId") }
        case .installation: writeInstallation(row, into: &bytes)
        case .session: writeSession(row, into: &bytes)
        }
        if !relationMembers.isEmpty {
            bytes.removeLast()
            bytes.append(contentsOf: relationMembers)
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// `hidden` reduced by the `userField:` entries whose field in `data` points to `userId`
    /// (Parse Server's `filterSensitiveData`: the intersection with each such entry's list).
    private static func hidden(_ hidden: Set<String>, _ entries: [ClassAccess.UserFieldProtection], row data: PostgresCell?, userId: String) -> Set<String> {
        guard let text = data?.text, case .object(let object)? = try? JSONParser().parse(text) else { return hidden }
        func names(_ value: JSONValue?) -> Bool {
            switch value {
            case .object(let pointer)?: pointer["objectId"]?.string == userId
            case .array(let items)?: items.contains { $0.object?["objectId"]?.string == userId }
            default: false
            }
        }
        var result = hidden
        for entry in entries where names(object[entry.field]) {
            result = result.intersection(entry.fields)
        }
        return result
    }

    private func wants(_ member: String) -> Bool {
        (wanted?.contains(member) ?? true) && (hidden.isEmpty || !hidden.contains(member))
    }

    private func writeUser(_ row: PostgresRow, objectId: PostgresCell?, into bytes: inout [UInt8]) {
        var wroteName = false
        if wants("username") {
            bytes.append(#","username":"#)
            Self.appendString(cell(row, username), to: &bytes)
            wroteName = true
        }
        var wroteEmail = false
        if wants("email"), viewer.isMaster || Self.cell(objectId, equals: viewer.userId), let emailCell = cell(row, email), !emailCell.isNull {
            bytes.append(#","email":"#)
            Self.appendString(emailCell, to: &bytes)
            wroteEmail = true
        }
        var wroteVerified = false
        if wants("emailVerified"), let emailVerified, let verified = row[emailVerified].bool {
            bytes.append(verified ? #","emailVerified":true"# : #","emailVerified":false"#)
            wroteVerified = true
        }
        // Linked logins are the user's own business, as Parse Server's `filterSensitiveData`.
        if wants("authData"), viewer.isMaster || Self.cell(objectId, equals: viewer.userId), let authCell = cell(row, authData), !authCell.isNull {
            bytes.append(#","authData":"#)
            Self.appendJSON(authCell, to: &bytes)
        }
        // `sessionToken` and `authData` are never `data` members (they are reserved; `me` and
        // login add the caller's token).
        writeDataAndMetadata(row, into: &bytes) { key in
            Self.equals(key, "objectId") || Self.equals(key, "sessionToken") || Self.equals(key, "authData")
                || (wroteName && Self.equals(key, "username"))
                || (wroteEmail && Self.equals(key, "email")) || (wroteVerified && Self.equals(key, "emailVerified"))
        }
    }

    /// The installation's typed members; its push tokens only for the master key or the
    /// installation's user (a token sends pushes, with message previews, to whoever holds the
    /// device it names). Its `data` never stands in for a typed member.
    private func writeInstallation(_ row: PostgresRow, into bytes: inout [UInt8]) {
        if wants("installationId") {
            bytes.append(#","installationId":"#)
            Self.appendString(cell(row, installationID), to: &bytes)
        }
        let user = cell(row, userID).flatMap { $0.isNull ? nil : $0 }
        let seesTokens = viewer.isMaster || Self.cell(user, equals: viewer.userId)
        for (member, column, name, isToken) in [(#","deviceType":"# as StaticString, deviceType, "deviceType", false),
                                                (#","deviceToken":"#, deviceToken, "deviceToken", true),
                                                (#","voipDeviceToken":"#, voipDeviceToken, "voipDeviceToken", true)] {
            guard wants(name), seesTokens || !isToken, let value = cell(row, column), !value.isNull else { continue }
            bytes.append(member)
            Self.appendString(value, to: &bytes)
        }
        if wants("user"), let user {
            bytes.append(#","user":"#)
            Self.appendPointer(user, to: &bytes)
        }
        writeDataAndMetadata(row, into: &bytes) { key in Self.installationMembers.contains { Self.equals(key, $0) } }
    }

    /// The members an installation row has as columns.
    private static let installationMembers: [StaticString] = ["objectId", "installationId", "deviceType", "deviceToken", "voipDeviceToken", "user"]

    private func writeSession(_ row: PostgresRow, into bytes: inout [UInt8]) {
        if wants("sessionToken") {
            bytes.append(#","sessionToken":"#)
            Self.appendString(cell(row, token), to: &bytes)
        }
        if wants("user") {
            bytes.append(#","user":"#)
            Self.appendPointer(cell(row, userID), to: &bytes)
        }
        if wants("createdWith"), let value = cell(row, createdWith), !value.isNull {
            bytes.append(#","createdWith":"#)
            Self.appendJSON(value, to: &bytes)
        }
        if wants("installationId"), let value = cell(row, installationID), !value.isNull {
            bytes.append(#","installationId":"#)
            Self.appendString(value, to: &bytes)
        }
        if wants("restricted") {
            let value = cell(row, restricted)?.bool ?? false
            bytes.append(value ? #","restricted":true"# : #","restricted":false"#)
        }
        if wants("expiresAt"), let timestamp = Timestamp(cell(row, expiresAt)) {
            bytes.append(#","expiresAt":{"__type":"Date","iso":"#)
            timestamp.append(to: &bytes)
            bytes.append(UInt8(ascii: "}"))
        }
        // Sessions have no `data` or `ACL` columns: a find selects empty ones.
        writeDataAndMetadata(row, into: &bytes) { _ in true }
    }

    /// The `data` members not `written` already (and wanted), then the metadata, then the
    /// closing brace. The `data` and `acl` texts are read in place from the result.
    private func writeDataAndMetadata(_ row: PostgresRow, into bytes: inout [UInt8], written: (MemberKey) -> Bool) {
        var created = Timestamp(cell(row, createdAt))
        var updated = Timestamp(cell(row, updatedAt))
        let aclCell = cell(row, acl)
        var aclPending = aclCell.map { !$0.isNull } ?? false
        if let dataCell = cell(row, data) {
            let start = bytes.count
            let copied = dataCell.withBytes { utf8 -> Bool? in
                guard let utf8 else { return nil }
                return JSONObjectText.forEachMember(utf8) { rawKey, value in
                    let key = MemberKey(rawKey)
                    guard !written(key), wanted.map({ key.isIn($0) }) ?? true, hidden.isEmpty || !key.isIn(hidden) else { return }
                    bytes.append(#",""#)
                    bytes.append(contentsOf: rawKey)
                    bytes.append(#"":"#)
                    if let timestamp = created, Self.equals(key, "createdAt") {
                        timestamp.append(to: &bytes)
                        created = nil
                    } else if let timestamp = updated, Self.equals(key, "updatedAt") {
                        timestamp.append(to: &bytes)
                        updated = nil
                    } else if aclPending, let aclCell, Self.equals(key, "ACL") {
                        Self.appendJSON(aclCell, to: &bytes)
                        aclPending = false
                    } else {
                        JSONObjectText.appendCompact(value, to: &bytes)
                    }
                }
            }
            // Not an object (data the schema never writes): no members.
            if copied == false {
                bytes.removeSubrange(start...)
                created = Timestamp(cell(row, createdAt))
                updated = Timestamp(cell(row, updatedAt))
                aclPending = aclCell.map { !$0.isNull } ?? false
            }
        }
        if let created {
            bytes.append(#","createdAt":"#)
            created.append(to: &bytes)
        }
        if let updated {
            bytes.append(#","updatedAt":"#)
            updated.append(to: &bytes)
        }
        if aclPending, let aclCell {
            bytes.append(#","ACL":"#)
            Self.appendJSON(aclCell, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private func cell(_ row: PostgresRow, _ column: Int?) -> PostgresCell? {
        column.map { row[$0] }
    }

    /// A text cell as a JSON string, written from its bytes; `""` for NULL or no such column.
    private static func appendString(_ cell: PostgresCell?, to bytes: inout [UInt8]) {
        guard let cell else { return bytes.append(#""""#) }
        cell.withBytes { utf8 in
            JSONSerializer.writeString(utf8: utf8 ?? UnsafeBufferPointer(start: nil, count: 0), into: &bytes)
        }
    }

    /// `{"__type":"Pointer","className":"_User","objectId":…}` for a user id cell.
    private static func appendPointer(_ cell: PostgresCell?, to bytes: inout [UInt8]) {
        bytes.append(#"{"__type":"Pointer","className":"_User","objectId":"#)
        appendString(cell, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Whether a non-NULL text cell holds exactly `text`'s bytes.
    private static func cell(_ cell: PostgresCell?, equals text: String?) -> Bool {
        guard let cell, var text else { return false }
        return cell.withBytes { utf8 in
            guard let utf8 else { return false }
            return text.withUTF8 { $0.elementsEqual(utf8) }
        }
    }

    /// A timestamp cell a row's JSON has: nil for NULL and for text that is not a timestamp.
    private enum Timestamp {
        /// PostgreSQL's UTC text (checked by `UTCTime.isPostgresUTC`), rewritten as is.
        case postgresUTC(PostgresCell)
        case milliseconds(Int64)

        init?(_ cell: PostgresCell?) {
            guard let cell else { return nil }
            let usual = cell.withBytes { utf8 in utf8.map(UTCTime.isPostgresUTC) ?? false }
            if usual {
                self = .postgresUTC(cell)
            } else if let milliseconds = cell.timestampMilliseconds {
                self = .milliseconds(milliseconds)
            } else {
                return nil
            }
        }

        /// A quoted ISO-8601 date (never needs escaping).
        func append(to bytes: inout [UInt8]) {
            bytes.append(UInt8(ascii: "\""))
            switch self {
            case .postgresUTC(let cell):
                cell.withBytes { utf8 in
                    if let utf8 { UTCTime.appendISO8601(postgresUTC: utf8, to: &bytes) }
                }
            case .milliseconds(let milliseconds):
                UTCTime.appendISO8601(milliseconds: milliseconds, to: &bytes)
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    /// A non-NULL `jsonb` cell's text (valid JSON by its type), compacted.
    private static func appendJSON(_ cell: PostgresCell, to bytes: inout [UInt8]) {
        cell.withBytes { utf8 in
            if let utf8 { JSONObjectText.appendCompact(utf8, to: &bytes) }
        }
    }

    /// Byte equality with the decoded key, as `JSONObject` compares keys (not Unicode equivalence).
    private static func equals(_ key: MemberKey, _ name: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        switch key {
        case .plain(let bytes): return bytes.count == expected.count && bytes.elementsEqual(expected)
        case .decoded(let decoded): return decoded.utf8.count == expected.count && decoded.utf8.elementsEqual(expected)
        }
    }

    /// A `data` member's key as its text has it; decoded only when it has escapes.
    private enum MemberKey {
        case plain(UnsafeBufferPointer<UInt8>)
        case decoded(String)

        init(_ raw: UnsafeBufferPointer<UInt8>) {
            guard raw.contains(UInt8(ascii: "\\")) else {
                self = .plain(raw)
                return
            }
            var quoted: [UInt8] = [UInt8(ascii: "\"")]
            quoted.append(contentsOf: raw)
            quoted.append(UInt8(ascii: "\""))
            if case .string(let text)? = try? JSONParser().parse(quoted) {
                self = .decoded(text)
            } else {
                self = .plain(raw)
            }
        }

        /// Whether the key is one of `names` (only with a `keys` list, off the hot path).
        func isIn(_ names: Set<String>) -> Bool {
            switch self {
            case .plain(let bytes): names.contains(String(decoding: bytes, as: UTF8.self))
            case .decoded(let text): names.contains(text)
            }
        }
    }
}
