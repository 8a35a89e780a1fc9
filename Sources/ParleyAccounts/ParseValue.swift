import ParleyJSON
import ParleyLog

/// Checks and normalises field values in Parse's JSON encoding before they are stored.
public enum ParseValue {
    /// Most nesting accepted inside one field value.
    public static let maxDepth = 32

    /// The type of `value` and the value to store: Dates normalised to ISO-8601 UTC with
    /// milliseconds, GeoPoints to plain numbers. `nil` type for JSON null (no type recorded).
    ///
    /// Errors: 111 for a malformed or unsupported `__type` object, 107 for a GeoPoint out of range
    /// or a string containing NUL (jsonb cannot store it).
    public static func normalise(_ value: JSONValue) throws(ParseError) -> (type: ParseFieldType?, value: JSONValue) {
        switch value {
        case .null:
            return (nil, .null)
        case .bool:
            return (.boolean, value)
        case .int, .double:
            if let d = value.double, !d.isFinite { throw .incorrectType("numbers must be finite") }
            return (.number, value)
        case .string(let text):
            try checkNoNUL(text)
            return (.string, value)
        case .array:
            try checkNested(value, depth: 0)
            return (.array, value)
        case .object(let object):
            guard let kind = object["__type"] else {
                if object["__op"] != nil { throw .incorrectType("a field operation cannot be nested in a value") }
                try checkNested(value, depth: 0)
                return (.object, value)
            }
            return try typed(kind, object)
        }
    }

    private static func typed(_ kind: JSONValue, _ object: JSONObject) throws(ParseError) -> (type: ParseFieldType?, value: JSONValue) {
        switch kind.string {
        case "Date":
            guard let iso = object["iso"]?.string, let ms = UTCTime.parseISO8601(iso) else {
                throw .incorrectType("invalid Date: expected {\"__type\":\"Date\",\"iso\":\"YYYY-MM-DDTHH:MM:SS.sssZ\"}")
            }
            return (.date, date(milliseconds: ms))
        case "Pointer":
            guard let className = object["className"]?.string, ClassName.isValid(className) || ClassName.isSystem(className),
                  let objectId = object["objectId"]?.string, RandomID.isPlausibleObjectID(objectId) else {
                throw .invalidPointer("invalid Pointer: expected {\"__type\":\"Pointer\",\"className\":…,\"objectId\":…}")
            }
            return (.pointer(targetClass: className), pointer(className: className, objectId: objectId))
        case "Relation":
            guard let className = object["className"]?.string, ClassName.isValid(className) || ClassName.isSystem(className) else {
                throw .incorrectType("invalid Relation: expected {\"__type\":\"Relation\",\"className\":…}")
            }
            return (.relation(targetClass: className), relation(className: className))
        case "GeoPoint":
            guard let lat = object["latitude"]?.double, let lng = object["longitude"]?.double, lat.isFinite, lng.isFinite else {
                throw .incorrectType("invalid GeoPoint: expected numeric latitude and longitude")
            }
            guard (-90.0...90.0).contains(lat) else { throw .invalidJSON("GeoPoint latitude out of bounds: \(lat) (must be within -90 and 90)") }
            guard (-180.0...180.0).contains(lng) else { throw .invalidJSON("GeoPoint longitude out of bounds: \(lng) (must be within -180 and 180)") }
            return (.geoPoint, geoPoint(latitude: lat, longitude: lng))
        case "Bytes":
            guard let base64 = object["base64"]?.string, isBase64(base64) else {
                throw .incorrectType("invalid Bytes: expected {\"__type\":\"Bytes\",\"base64\":…}")
            }
            return (.bytes, ["__type": "Bytes", "base64": .string(base64)])
        case let other?:
            throw .incorrectType("unsupported type \(other) (Parley stores String, Number, Boolean, Date, Object, Array, Pointer, Relation, GeoPoint, Bytes)")
        case nil:
            throw .incorrectType("__type must be a string")
        }
    }

    /// `{"__type":"Date","iso":…}` for a Unix time in milliseconds.
    public static func date(milliseconds: Int64) -> JSONValue {
        ["__type": "Date", "iso": .string(UTCTime.iso8601(milliseconds: milliseconds))]
    }

    /// `{"__type":"Pointer","className":…,"objectId":…}`.
    public static func pointer(className: String, objectId: String) -> JSONValue {
        ["__type": "Pointer", "className": .string(className), "objectId": .string(objectId)]
    }

    /// `{"__type":"Relation","className":…}`: a Relation field's value in every answer.
    public static func relation(className: String) -> JSONValue {
        ["__type": "Relation", "className": .string(className)]
    }

    /// `{"__type":"GeoPoint","latitude":…,"longitude":…}`.
    public static func geoPoint(latitude: Double, longitude: Double) -> JSONValue {
        ["__type": "GeoPoint", "latitude": .double(latitude), "longitude": .double(longitude)]
    }

    /// Refuses NUL in every string and key of a nested value, and nesting deeper than `maxDepth`.
    public static func checkNested(_ value: JSONValue, depth: Int) throws(ParseError) {
        guard depth <= maxDepth else { throw .incorrectType("values may nest at most \(maxDepth) levels") }
        switch value {
        case .string(let text):
            try checkNoNUL(text)
        case .array(let items):
            for item in items { try checkNested(item, depth: depth + 1) }
        case .object(let object):
            for (key, item) in object {
                try checkNoNUL(key)
                try checkNested(item, depth: depth + 1)
            }
        default:
            break
        }
    }

    static func checkNoNUL(_ text: String) throws(ParseError) {
        if text.utf8.contains(0) { throw ParseError.nulCharacter }
    }

    static func isBase64(_ text: String) -> Bool {
        text.utf8.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 43 || $0 == 47 || $0 == 61 }
    }
}
