import ParleyLog

/// A statement parameter. Sent in text format with an explicit type OID (or untyped for text and
/// NULL, so the server infers the type from context, e.g. `WHERE id = $1` on a bigint column).
public enum PostgresData: Sendable, Equatable {
    case null
    /// Untyped text: the server infers the parameter's type.
    case text(String)
    /// `int8`.
    case int(Int)
    /// `float8`.
    case double(Double)
    /// `bool`.
    case bool(Bool)
    /// `bytea`.
    case bytea([UInt8])
    /// `jsonb` from JSON text.
    case json(String)
    /// `timestamptz` from milliseconds since the Unix epoch.
    case timestamp(milliseconds: Int64)
    /// `text[]`.
    case textArray([String])
    /// `int8[]`.
    case intArray([Int])

    /// The type OID sent with the parameter (0 lets the server infer it).
    public var typeOID: UInt32 {
        switch self {
        case .null, .text: 0
        case .int: PostgresTypeOID.int8
        case .double: PostgresTypeOID.float8
        case .bool: PostgresTypeOID.bool
        case .bytea: PostgresTypeOID.bytea
        case .json: PostgresTypeOID.jsonb
        case .timestamp: PostgresTypeOID.timestamptz
        case .textArray: PostgresTypeOID.textArray
        case .intArray: PostgresTypeOID.int8Array
        }
    }

    /// Appends `textValue` to `bytes` with no `String` in between for text, JSON and text
    /// arrays (the parameters of every find); false, appending nothing, for NULL.
    func appendTextValue(to bytes: inout [UInt8]) -> Bool {
        switch self {
        case .null:
            return false
        case .text(var text), .json(var text):
            text.withUTF8 { bytes.append(contentsOf: $0) }
        case .textArray(let items):
            PostgresText.appendArrayLiteral(items, to: &bytes)
        default:
            guard var text = textValue else { return false }
            text.withUTF8 { bytes.append(contentsOf: $0) }
        }
        return true
    }

    /// The value in PostgreSQL's text input format, nil for NULL.
    public var textValue: String? {
        switch self {
        case .null: return nil
        case .text(let s), .json(let s): return s
        case .int(let i): return String(i)
        case .double(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d > 0 ? "Infinity" : "-Infinity" }
            return String(d)
        case .bool(let b): return b ? "t" : "f"
        case .bytea(let bytes): return PostgresText.hexBytea(bytes)
        case .timestamp(let ms): return UTCTime.iso8601(milliseconds: ms)
        case .textArray(let items): return PostgresText.arrayLiteral(items)
        case .intArray(let items): return "{" + items.map(String.init).joined(separator: ",") + "}"
        }
    }
}

/// OIDs of the built-in types the client encodes or decodes.
public enum PostgresTypeOID {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let oid: UInt32 = 26
    public static let json: UInt32 = 114
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let varchar: UInt32 = 1043
    public static let date: UInt32 = 1082
    public static let timestamp: UInt32 = 1114
    public static let timestamptz: UInt32 = 1184
    public static let numeric: UInt32 = 1700
    public static let uuid: UInt32 = 2950
    public static let jsonb: UInt32 = 3802
    public static let textArray: UInt32 = 1009
    public static let int8Array: UInt32 = 1016
}
