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

    init(_ columns: PostgresColumns) {
        objectID = columns.index(of: "object_id")
        createdAt = columns.index(of: "created_at")
        updatedAt = columns.index(of: "updated_at")
        acl = columns.index(of: "acl")
        data = columns.index(of: "data")
        username = columns.index(of: "username")
        email = columns.index(of: "email")
        emailVerified = columns.index(of: "email_verified")
    }

    /// `UserStore.json(row, viewer:)`, serialized.
    func writeUser(_ row: PostgresRow, viewer: Auth, into bytes: inout [UInt8]) {
        let objectId = text(row, objectID) ?? ""
        bytes.append(contentsOf: #"{"objectId":"#.utf8)
        JSONValue.string(objectId).serialize(into: &bytes)
        bytes.append(contentsOf: #","username":"#.utf8)
        JSONValue.string(text(row, username) ?? "").serialize(into: &bytes)
        var wroteEmail = false
        if viewer.isMaster || viewer.userId == objectId, let email = text(row, email) {
            bytes.append(contentsOf: #","email":"#.utf8)
            JSONValue.string(email).serialize(into: &bytes)
            wroteEmail = true
        }
        var wroteVerified = false
        if let emailVerified, let verified = row[emailVerified].bool {
            bytes.append(contentsOf: verified ? #","emailVerified":true"#.utf8 : #","emailVerified":false"#.utf8)
            wroteVerified = true
        }
        writeDataAndMetadata(row, into: &bytes) { key in
            Self.equals(key, "objectId") || Self.equals(key, "username")
                || (wroteEmail && Self.equals(key, "email")) || (wroteVerified && Self.equals(key, "emailVerified"))
        }
    }

    /// `ObjectStore.json(row)`, serialized.
    func writeObject(_ row: PostgresRow, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"objectId":"#.utf8)
        JSONValue.string(text(row, objectID) ?? "").serialize(into: &bytes)
        writeDataAndMetadata(row, into: &bytes) { Self.equals($0, "objectId") }
    }

    /// The `data` members not `written` already, then the metadata, then the closing brace.
    /// The `data` and `acl` texts are read in place from the result (`PostgresCell.withBytes`).
    private func writeDataAndMetadata(_ row: PostgresRow, into bytes: inout [UInt8], written: (MemberKey) -> Bool) {
        var created = cell(row, createdAt)?.timestampMilliseconds
        var updated = cell(row, updatedAt)?.timestampMilliseconds
        let aclCell = cell(row, acl)
        var aclPending = aclCell.map { !$0.isNull } ?? false
        if let dataCell = cell(row, data) {
            let start = bytes.count
            let copied = dataCell.withBytes { utf8 -> Bool? in
                guard let utf8 else { return nil }
                return JSONObjectText.forEachMember(utf8) { rawKey, value in
                    let key = MemberKey(rawKey)
                    guard !written(key) else { return }
                    bytes.append(contentsOf: #",""#.utf8)
                    bytes.append(contentsOf: rawKey)
                    bytes.append(contentsOf: #"":"#.utf8)
                    if let milliseconds = created, Self.equals(key, "createdAt") {
                        Self.appendDate(milliseconds, to: &bytes)
                        created = nil
                    } else if let milliseconds = updated, Self.equals(key, "updatedAt") {
                        Self.appendDate(milliseconds, to: &bytes)
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
                created = cell(row, createdAt)?.timestampMilliseconds
                updated = cell(row, updatedAt)?.timestampMilliseconds
                aclPending = aclCell.map { !$0.isNull } ?? false
            }
        }
        if let created {
            bytes.append(contentsOf: #","createdAt":"#.utf8)
            Self.appendDate(created, to: &bytes)
        }
        if let updated {
            bytes.append(contentsOf: #","updatedAt":"#.utf8)
            Self.appendDate(updated, to: &bytes)
        }
        if aclPending, let aclCell {
            bytes.append(contentsOf: #","ACL":"#.utf8)
            Self.appendJSON(aclCell, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private func text(_ row: PostgresRow, _ column: Int?) -> String? {
        cell(row, column)?.string
    }

    private func cell(_ row: PostgresRow, _ column: Int?) -> PostgresCell? {
        column.map { row[$0] }
    }

    /// A quoted ISO-8601 date (never needs escaping).
    private static func appendDate(_ milliseconds: Int64, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        UTCTime.appendISO8601(milliseconds: milliseconds, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
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
