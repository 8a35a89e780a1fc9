import ParleyJSON
import ParleyLog

/// The type a class field holds, as recorded in `class_schemas` on its first write.
public enum ParseFieldType: Sendable, Equatable, CustomStringConvertible {
    case string, number, boolean, date, object, array, geoPoint, bytes
    /// A pointer to objects of one class.
    case pointer(targetClass: String)
    /// A relation to objects of one class (its members live in `_Join:<field>:<class>`).
    case relation(targetClass: String)

    /// The name stored in `class_schemas.type` (and shown in errors), as Parse's schema names it.
    public var name: String {
        switch self {
        case .string: "String"
        case .number: "Number"
        case .boolean: "Boolean"
        case .date: "Date"
        case .object: "Object"
        case .array: "Array"
        case .geoPoint: "GeoPoint"
        case .bytes: "Bytes"
        case .pointer: "Pointer"
        case .relation: "Relation"
        }
    }

    /// The target class of a pointer.
    public var targetClass: String? {
        switch self {
        case .pointer(let target), .relation(let target): target
        default: nil
        }
    }

    public var description: String {
        targetClass.map { "\(name)<\($0)>" } ?? name
    }

    /// The type for a stored `(type, target_class)` pair, nil for an unknown name.
    public init?(name: String, targetClass: String?) {
        switch name {
        case "String": self = .string
        case "Number": self = .number
        case "Boolean": self = .boolean
        case "Date": self = .date
        case "Object": self = .object
        case "Array": self = .array
        case "GeoPoint": self = .geoPoint
        case "Bytes": self = .bytes
        case "Pointer":
            guard let targetClass else { return nil }
            self = .pointer(targetClass: targetClass)
        case "Relation":
            guard let targetClass else { return nil }
            self = .relation(targetClass: targetClass)
        default: return nil
        }
    }
}
