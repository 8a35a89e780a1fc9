/// A strict RFC 8259 JSON parser with a nesting limit and a size limit.
///
/// It accepts exactly the RFC grammar (any value at top level, whitespace around it) and
/// rejects everything else: trailing commas, comments, single quotes, `NaN`/`Infinity`,
/// leading zeros, a byte order mark, invalid UTF-8, unpaired surrogate escapes, trailing data.
/// Integers that fit in `Int64` parse exactly as `.int`; other numbers become a correctly
/// rounded `.double` (magnitudes beyond `Double` are an error, tiny ones round to zero).
/// In objects, a repeated key keeps its last value at the position of its first occurrence.
///
/// Parsing is iterative (no recursion), so hostile nesting cannot overflow the stack.
public struct JSONParser: Sendable {
    /// Default for `maxDepth`.
    public static let defaultMaxDepth = 128
    /// Default for `maxBytes`: 16 MiB.
    public static let defaultMaxBytes = 16 * 1024 * 1024

    /// How many arrays and objects may nest: `maxDepth` levels parse, one more is an error.
    public var maxDepth: Int
    /// The longest input accepted, in bytes; this also bounds every string, array and object.
    public var maxBytes: Int

    public init(maxDepth: Int = JSONParser.defaultMaxDepth, maxBytes: Int = JSONParser.defaultMaxBytes) {
        precondition(maxDepth >= 0 && maxBytes >= 0, "JSONParser: limits must not be negative")
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }

    /// Parses one JSON document from UTF-8 bytes.
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSONValue {
        guard bytes.count <= maxBytes else {
            throw .tooLarge(size: bytes.count, limit: maxBytes)
        }
        var reader = JSONReader(bytes: bytes, maxDepth: maxDepth)
        return try reader.parseDocument()
    }

    /// Parses one JSON document from UTF-8 bytes, such as a `[UInt8]` or an `ArraySlice<UInt8>`.
    public func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(JSONError) -> JSONValue {
        let size = bytes.count
        guard size <= maxBytes else {
            throw .tooLarge(size: size, limit: maxBytes)
        }
        let result = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer)) }
        }
        if let result {
            return try result.get()
        }
        let copy = Array(bytes)
        return try copy.withUnsafeBytes { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(buffer) }
        }.get()
    }

    /// Parses one JSON document from a string (its UTF-8 form).
    public func parse(_ text: String) throws(JSONError) -> JSONValue {
        var text = text
        return try text.withUTF8 { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer)) }
        }.get()
    }
}
