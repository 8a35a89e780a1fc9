import ParleyJSON

/// A Parse field operation (`{"__op": …}`) from an update body.
public enum FieldOperation: Sendable, Equatable {
    /// Adds a number to a numeric field (missing counts as 0).
    case increment(JSONValue)
    /// Appends the objects to an array field.
    case add([JSONValue])
    /// Appends the objects not already in the array.
    case addUnique([JSONValue])
    /// Removes every occurrence of the objects from the array.
    case remove([JSONValue])
    /// Removes the field.
    case delete

    /// Most objects one Add/AddUnique/Remove may carry.
    public static let maxObjects = 1000

    /// The operation in `object` (which has an `__op` member). 111 for an unknown or malformed op.
    public init(_ object: JSONObject) throws(ParseError) {
        guard let op = object["__op"]?.string else { throw .incorrectType("__op must be a string") }
        switch op {
        case "Increment":
            let amount = object["amount"] ?? .int(1)
            guard amount.double?.isFinite == true else { throw .incorrectType("Increment amount must be a number") }
            self = .increment(amount)
        case "Add", "AddUnique", "Remove":
            guard let objects = object["objects"]?.array else { throw .invalidJSON("objects to \(op) must be an array") }
            guard objects.count <= Self.maxObjects else { throw .invalidJSON("at most \(Self.maxObjects) objects per \(op)") }
            var normalised: [JSONValue] = []
            for item in objects {
                let value = try ParseValue.normalise(item).value
                normalised.append(value)
            }
            switch op {
            case "Add": self = .add(normalised)
            case "AddUnique":
                var unique: [JSONValue] = []
                for item in normalised where !unique.contains(item) { unique.append(item) }
                self = .addUnique(unique)
            default: self = .remove(normalised)
            }
        case "Delete":
            self = .delete
        default:
            throw .incorrectType("unsupported field operation \(op) (Parley supports Increment, Add, AddUnique, Remove, Delete)")
        }
    }

    /// The field type the operation requires (nil for Delete).
    public var requiredType: ParseFieldType? {
        switch self {
        case .increment: .number
        case .add, .addUnique, .remove: .array
        case .delete: nil
        }
    }

    /// The jsonb expression of the field's new value, given `old` (an expression for the current
    /// value, e.g. `data->$3::text`). Nil for Delete (the key is removed instead).
    func sqlExpression(old: String, builder: inout SQLBuilder) -> String? {
        switch self {
        case .increment(let amount):
            let param: String
            if let i = amount.int, case .int = amount { param = builder.bind(.int(Int(i))) } else { param = builder.bind(.double(amount.double ?? 0)) }
            return "to_jsonb(COALESCE(CASE WHEN jsonb_typeof(\(old)) = 'number' THEN (\(old)#>>'{}')::numeric END, 0) + \(param)::numeric)"
        case .add(let objects):
            let list = builder.bind(.json(JSONValue.array(objects).serialized()))
            return "(COALESCE(CASE WHEN jsonb_typeof(\(old)) = 'array' THEN \(old) END, '[]'::jsonb) || \(list)::jsonb)"
        case .addUnique(let objects):
            let list = builder.bind(.json(JSONValue.array(objects).serialized()))
            let current = "COALESCE(CASE WHEN jsonb_typeof(\(old)) = 'array' THEN \(old) END, '[]'::jsonb)"
            return "(\(current) || (SELECT COALESCE(jsonb_agg(n.e ORDER BY n.i), '[]'::jsonb) FROM jsonb_array_elements(\(list)::jsonb) WITH ORDINALITY AS n(e, i) WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(\(current)) AS c(e) WHERE c.e = n.e)))"
        case .remove(let objects):
            let list = builder.bind(.json(JSONValue.array(objects).serialized()))
            let current = "COALESCE(CASE WHEN jsonb_typeof(\(old)) = 'array' THEN \(old) END, '[]'::jsonb)"
            return "(SELECT COALESCE(jsonb_agg(c.e ORDER BY c.i), '[]'::jsonb) FROM jsonb_array_elements(\(current)) WITH ORDINALITY AS c(e, i) WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(\(list)::jsonb) AS r(e) WHERE r.e = c.e))"
        case .delete:
            return nil
        }
    }
}
