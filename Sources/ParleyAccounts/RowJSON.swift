import ParleyJSON
import ParleyLog
import ParleyPostgres

/// Turns the shared columns of `users`, `objects` and `installations` rows into Parse JSON.
enum RowJSON {
    /// The custom fields of a row's `data` column (empty when NULL or unparsable).
    static func data(_ row: PostgresRow, column: String = "data") -> JSONObject {
        guard let text = row[column].json, let value = try? JSONParser().parse(text), case .object(let object) = value else {
            return JSONObject()
        }
        return object
    }

    /// Adds `createdAt`, `updatedAt` (ISO strings) and `ACL` (when set) from the row.
    static func addMetadata(_ row: PostgresRow, to object: inout JSONObject) {
        if let created = row["created_at"].timestampMilliseconds { object["createdAt"] = .string(UTCTime.iso8601(milliseconds: created)) }
        if let updated = row["updated_at"].timestampMilliseconds { object["updatedAt"] = .string(UTCTime.iso8601(milliseconds: updated)) }
        if let text = row["acl"].json, let acl = try? JSONParser().parse(text) { object["ACL"] = acl }
    }

    /// Keeps only `keys` (plus the fields Parse always returns) when a `keys` list was given.
    static func select(_ object: JSONObject, keys: [String]?) -> JSONObject {
        guard let keys else { return object }
        let wanted = Set(keys).union(["objectId", "createdAt", "updatedAt", "ACL", "sessionToken"])
        return JSONObject(object.filter { wanted.contains($0.key) }.map { ($0.key, $0.value) })
    }
}
