import ParleyJSON
import ParleyLog

/// A constraint operand classified by how it is matched, with Parse types canonicalised
/// (Dates as ISO-8601 UTC with milliseconds, Pointers reduced to their three keys).
enum QueryOperand: Equatable {
    /// JSON null: matches a missing field or a stored null.
    case null
    /// String, number or boolean.
    case scalar(JSONValue)
    /// A Parse typed object (`__type`): Date, Pointer, GeoPoint, Bytes, File…
    case typed(JSONValue)
    /// An array or a plain object, matched exactly.
    case structured(JSONValue)

    init(_ value: JSONValue, field: String) throws(QueryError) {
        guard !Self.containsNUL(value) else {
            throw .invalidQuery("the value for \(field) contains U+0000, which can never be stored")
        }
        switch value {
        case .null:
            self = .null
        case .bool, .int, .double, .string:
            self = .scalar(value)
        case .array:
            self = .structured(value)
        case .object(let object):
            guard let type = object["__type"] else {
                self = .structured(value)
                return
            }
            switch type.string {
            case "Date":
                self = .typed(.object(["__type": "Date", "iso": .string(try Self.canonicalDate(object, field: field).iso)]))
            case "Pointer":
                let pointer = try Self.pointer(object, field: field)
                self = .typed(.object(["__type": "Pointer", "className": .string(pointer.className), "objectId": .string(pointer.objectId)]))
            case .some:
                self = .typed(value)
            case .none:
                throw .invalidQuery("__type of the value for \(field) must be a string")
            }
        }
    }

    /// The JSON value as stored in `data`.
    var json: JSONValue {
        switch self {
        case .null: .null
        case .scalar(let value), .typed(let value), .structured(let value): value
        }
    }

    /// The Parse type name of a typed operand.
    var typeName: String? {
        guard case .typed(let value) = self else { return nil }
        return value["__type"]?.string
    }

    /// A Date object's instant, canonical ISO text and milliseconds since the epoch.
    static func canonicalDate(_ object: JSONObject, field: String) throws(QueryError) -> (iso: String, milliseconds: Int64) {
        guard let iso = object["iso"]?.string, let milliseconds = UTCTime.parseISO8601(iso) else {
            throw .invalidQuery("invalid Date for \(field): iso must be an ISO-8601 UTC date")
        }
        return (UTCTime.iso8601(milliseconds: milliseconds), milliseconds)
    }

    /// The milliseconds of a Date object or of an ISO-8601 string (nil for any other value).
    static func dateMilliseconds(_ value: JSONValue, field: String) throws(QueryError) -> Int64? {
        switch value {
        case .string(let text):
            guard let milliseconds = UTCTime.parseISO8601(text) else {
                throw .invalidQuery("invalid date for \(field): \(text) is not an ISO-8601 UTC date")
            }
            return milliseconds
        case .object(let object) where object["__type"]?.string == "Date":
            return try canonicalDate(object, field: field).milliseconds
        default:
            return nil
        }
    }

    /// The class and id of a Pointer object.
    static func pointer(_ object: JSONObject, field: String) throws(QueryError) -> (className: String, objectId: String) {
        guard let className = object["className"]?.string, let objectId = object["objectId"]?.string, !className.isEmpty else {
            throw .invalidQuery("invalid Pointer for \(field): className and objectId must be strings")
        }
        return (className, objectId)
    }

    static func containsNUL(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): return text.utf8.contains(0)
        case .array(let items): return items.contains { containsNUL($0) }
        case .object(let object): return object.contains { $0.key.utf8.contains(0) || containsNUL($0.value) }
        case .null, .bool, .int, .double: return false
        }
    }
}
