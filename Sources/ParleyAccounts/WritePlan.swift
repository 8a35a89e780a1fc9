import ParleyJSON
import ParleyLog
import ParleyPostgres

/// A create or update body taken apart: plain values to set, field operations, the ACL, and the
/// class-specific core fields, all validated.
public struct WritePlan: Sendable {
    /// Custom fields to set, values normalised (JSON null included).
    public private(set) var sets: [(field: String, value: JSONValue)] = []
    /// Field operations.
    public private(set) var operations: [(field: String, operation: FieldOperation)] = []
    /// `.some(nil)`: the ACL is removed; `.none`: untouched.
    public private(set) var acl: ACL?? = .none
    /// Members named in `coreFields`, left for the store to handle (raw, unvalidated).
    public private(set) var core: JSONObject = JSONObject()
    /// The GeoPoint being set, if any (the class's one geo field, mirrored into `geo`).
    public private(set) var geoPoint: (field: String, latitude: Double, longitude: Double)?

    /// Most fields one write may touch.
    public static let maxFields = 256

    /// Splits `body`. `coreFields` go to `core`; `reserved` names are refused (105).
    public init(body: JSONObject, isCreate: Bool, coreFields: Set<String> = [], reserved: Set<String> = []) throws(ParseError) {
        guard body.count <= Self.maxFields else { throw .objectTooLarge("at most \(Self.maxFields) fields per write") }
        for (key, value) in body {
            switch key {
            case "ACL":
                if value.isNull { acl = .some(nil) } else { acl = .some(try ACL(json: value)) }
                continue
            case "createdAt", "updatedAt":
                continue
            case "objectId":
                if isCreate { throw .invalidKeyName("objectId is an invalid field name.") }
                continue
            default:
                break
            }
            if coreFields.contains(key) {
                core[key] = value
                continue
            }
            guard ClassName.isValid(key), !reserved.contains(key) else {
                throw .invalidKeyName("Invalid field name: \(key).")
            }
            if case .object(let object) = value, object["__op"] != nil {
                let operation = try FieldOperation(object)
                operations.append((key, operation))
                continue
            }
            let (type, normalised) = try ParseValue.normalise(value)
            if type == .geoPoint, let lat = normalised["latitude"]?.double, let lng = normalised["longitude"]?.double {
                guard geoPoint == nil else { throw .incorrectType("there can only be one GeoPoint field in a class") }
                geoPoint = (key, lat, lng)
            }
            sets.append((key, normalised))
        }
    }

    /// Types the schema must record or match: set values and operations' required types.
    public var fieldTypes: [(field: String, type: ParseFieldType)] {
        var result: [(String, ParseFieldType)] = []
        for (field, value) in sets {
            if let type = try? ParseValue.normalise(value).type { result.append((field, type)) }
        }
        for (field, operation) in operations {
            if let type = operation.requiredType { result.append((field, type)) }
        }
        return result
    }

    /// Fields whose value goes away (Delete or null): if one is the class's GeoPoint, `geo` is cleared.
    public var clearedFields: [String] {
        sets.filter { $0.value.isNull }.map(\.field) + operations.filter { $0.operation == .delete }.map(\.field)
    }

    /// Whether nothing but core fields is written.
    public var touchesData: Bool { !sets.isEmpty || !operations.isEmpty }

    /// The `data` of a new object: sets plus operations applied to nothing.
    public func initialData() -> JSONObject {
        var data = JSONObject()
        for (field, value) in sets { data[field] = value }
        for (field, operation) in operations {
            switch operation {
            case .increment(let amount): data[field] = amount
            case .add(let objects): data[field] = .array(objects)
            case .addUnique(let objects): data[field] = .array(objects)
            case .remove: data[field] = .array([])
            case .delete: data[field] = nil
            }
        }
        return data
    }

    /// The `SET` assignments every update shares: `data`, the mirrored `geo` column, `updated_at`.
    /// `types` are the class's field types after this write; `now` is the new `updatedAt`.
    func updateAssignments(types: [String: ParseFieldType], now: Int64, builder: inout SQLBuilder) -> [String] {
        var assignments: [String] = []
        if touchesData {
            assignments.append("data = \(dataExpression(column: "data", builder: &builder))")
        }
        if let geo = geoPoint {
            assignments.append("geo = \(ACLSQL.geo(latitude: geo.latitude, longitude: geo.longitude, builder: &builder))")
        } else if clearedFields.contains(where: { types[$0] == .geoPoint }) {
            assignments.append("geo = NULL")
        }
        assignments.append("updated_at = \(builder.bind(.timestamp(milliseconds: now)))")
        return assignments
    }

    /// The SQL expression of the new `data` from `column`, applied atomically by one UPDATE.
    func dataExpression(column: String, builder: inout SQLBuilder) -> String {
        var expression = column
        for (field, operation) in operations where operation == .delete {
            expression = "(\(expression) - \(builder.key(field)))"
        }
        var pairs: [String] = []
        for (field, operation) in operations where operation != .delete {
            let old = "\(column)->\(builder.key(field))"
            if let value = operation.sqlExpression(old: old, builder: &builder) {
                pairs.append("\(builder.key(field)), \(value)")
            }
        }
        // jsonb_build_object takes at most 100 arguments: 50 pairs per call.
        var start = 0
        while start < pairs.count {
            let chunk = pairs[start..<min(start + 50, pairs.count)]
            expression = "(\(expression) || jsonb_build_object(\(chunk.joined(separator: ", "))))"
            start += 50
        }
        if !sets.isEmpty {
            var object = JSONObject()
            for (field, value) in sets { object[field] = value }
            expression = "(\(expression) || \(builder.bind(.json(JSONValue.object(object).serialized()))))"
        }
        return expression
    }

    /// The fields to echo back after an update (Parse returns the results of operations).
    public var operationFields: [String] {
        operations.filter { $0.operation != .delete }.map(\.field)
    }

    /// An update's answer: `{updatedAt}` plus the new value of every field changed by an
    /// operation (as Parse Server), read from the `data` column the UPDATE returned.
    func updateResponse(_ row: PostgresRow, now: Int64) -> JSONObject {
        var response: JSONObject = ["updatedAt": .string(UTCTime.iso8601(milliseconds: now))]
        let fields = operationFields
        guard !fields.isEmpty else { return response }
        var data = JSONObject()
        if let text = row["data"].json, case .object(let object)? = try? JSONParser().parse(text) { data = object }
        for field in fields { response[field] = data[field] ?? .null }
        return response
    }
}
