import ParleyJSON
import ParleyLog
import ParleyPostgres

/// Writes `users` and `objects` rows as Parse JSON straight into a byte buffer: the JSON of
/// `UserStore.json` and `ObjectStore.json`, without building those objects.
///
/// Finds are the hottest read path, and building an object per row (then an array of them, then
/// serializing it all) cost more than the query itself. The `data` members are copied from
/// PostgreSQL's `jsonb` text with only its whitespace dropped, so numbers keep PostgreSQL's
/// spelling (`2.0`, `1E+2` written `100`) and strings its escapes: the same values as the
/// serialized objects, not always the same bytes. The member order and the merge rules are the
/// same: the fixed members first, then the `data` members they do not shadow, then `createdAt`,
/// `updatedAt` and `ACL`, which replace a same-named `data` member in place.
struct RowJSONWriter {
    /// Positions of the columns read, resolved once for every row of a result.
    private let objectID, createdAt, updatedAt, acl, data: Int?
    private let username, email, emailVerified: Int?

    private static let columnNames = PostgresColumnNames([
        "object_id", "created_at", "updated_at", "acl", "data", "username", "email", "email_verified",
    ])

    init(_ columns: PostgresColumns) {
        let positions = columns.positions(of: Self.columnNames)
        objectID = positions[0]
        createdAt = positions[1]
        updatedAt = positions[2]
        acl = positions[3]
        data = positions[4]
        username = positions[5]
        email = positions[6]
        emailVerified = positions[7]
    }

    /// `UserStore.json(row, viewer:)`, serialized.
    func writeUser(_ row: PostgresRow, viewer: Auth, into bytes: inout [UInt8]) {
        let objectIdCell = cell(row, objectID)
        bytes.append(#"{"objectId":"#)
        Self.appendString(objectIdCell, to: &bytes)
        bytes.append(#","username":"#)
        Self.appendString(cell(row, username), to: &bytes)
        var wroteEmail = false
        if viewer.isMaster || Self.cell(objectIdCell, equals: viewer.userId), let emailCell = cell(row, email), !emailCell.isNull {
            bytes.append(#","email":"#)
            Self.appendString(emailCell, to: &bytes)
            wroteEmail = true
        }
        var wroteVerified = false
        if let emailVerified, let verified = row[emailVerified].bool {
            bytes.append(verified ? #","emailVerified":true"# : #","emailVerified":false"#)
            wroteVerified = true
        }
        writeDataAndMetadata(row, into: &bytes) { key in
            Self.equals(key, "objectId") || Self.equals(key, "username")
                || (wroteEmail && Self.equals(key, "email")) || (wroteVerified && Self.equals(key, "emailVerified"))
        }
    }

    /// `ObjectStore.json(row)`, serialized.
    func writeObject(_ row: PostgresRow, into bytes: inout [UInt8]) {
        bytes.append(#"{"objectId":"#)
        Self.appendString(cell(row, objectID), to: &bytes)
        writeDataAndMetadata(row, into: &bytes) { Self.equals($0, "objectId") }
    }

    /// The `data` members not `written` already, then the metadata, then the closing brace.
    /// The `data` and `acl` texts are read in place from the result (`PostgresCell.withBytes`).
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
                    guard !written(key) else { return }
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
            // Not an object (data the schema never writes): no members, as the parsing path.
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
    }
}
