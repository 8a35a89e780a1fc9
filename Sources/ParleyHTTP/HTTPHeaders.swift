/// An ordered list of header fields with case-insensitive lookup.
///
/// Names and values are kept as byte ranges over one byte array: a parsed request's headers
/// reference the raw head bytes copied once from the socket, so no per-header `String` is made
/// unless a caller asks for one. Added fields are appended to the same array.
public struct HTTPHeaders: Sendable {
    struct Field: Sendable, Equatable {
        var nameStart: UInt32
        var nameLength: UInt32
        var valueStart: UInt32
        var valueLength: UInt32
    }

    @usableFromInline var storage: [UInt8]
    var fields: [Field]

    /// An empty list.
    public init() {
        storage = []
        fields = []
    }

    /// A list with these fields, in order.
    public init(_ pairs: [(String, String)]) {
        self.init()
        for (name, value) in pairs { add(name, value) }
    }

    init(storage: [UInt8], fields: [Field]) {
        self.storage = storage
        self.fields = fields
    }

    /// The number of field lines.
    public var count: Int { fields.count }

    public var isEmpty: Bool { fields.isEmpty }

    /// The first value of `name` (any case), or nil.
    public subscript(name: String) -> String? {
        guard let index = firstIndex(of: name) else { return nil }
        return value(at: index)
    }

    /// Calls `body` with the bytes of the first value of `name` (any case), without making a
    /// `String`; nil when there is no such field.
    @inlinable
    public func withFirstValue<R>(_ name: String, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
        // Inlinable so that the borrow of the storage is specialized for the caller's `R`.
        guard let value = firstValueRange(of: name) else { return nil }
        return try storage.withUnsafeBufferPointer { bytes in try body(UnsafeBufferPointer(rebasing: bytes[value])) }
    }

    /// Where the first value of `name` lies in `storage`.
    @usableFromInline
    func firstValueRange(of name: String) -> Range<Int>? {
        guard let index = firstIndex(of: name) else { return nil }
        let field = fields[index]
        return Int(field.valueStart)..<Int(field.valueStart + field.valueLength)
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        var result: [String] = []
        for index in fields.indices where nameMatches(index, name) {
            result.append(value(at: index))
        }
        return result
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool {
        firstIndex(of: name) != nil
    }

    /// Whether any `name` field's comma-separated list has `token` (ASCII case-insensitive).
    public func containsToken(_ token: String, in name: String) -> Bool {
        for index in fields.indices where nameMatches(index, name) {
            let found = withValueBytes(at: index) { value in
                HTTPHeaders.listContains(value, token)
            }
            if found { return true }
        }
        return false
    }

    /// Appends a field. Bytes that would break the framing (CR, LF, other controls) are
    /// replaced: by a space in values, by `-` in names.
    public mutating func add(_ name: String, _ value: String) {
        let nameStart = storage.count
        for byte in name.utf8 {
            storage.append(HTTPCharacterClass.isToken(byte) ? byte : 0x2D)
        }
        if storage.count == nameStart { storage.append(0x2D) }
        let nameLength = storage.count - nameStart
        let valueStart = storage.count
        for byte in value.utf8 {
            storage.append(HTTPCharacterClass.isFieldValue(byte) ? byte : .space)
        }
        fields.append(Field(
            nameStart: UInt32(nameStart), nameLength: UInt32(nameLength),
            valueStart: UInt32(valueStart), valueLength: UInt32(storage.count - valueStart)))
    }

    /// Replaces every `name` field by one with `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    /// Removes every `name` field.
    public mutating func remove(_ name: String) {
        fields.removeAll { field in
            storage.withUnsafeBufferPointer { bytes in
                HTTPHeaders.bytesEqualCaseInsensitive(bytes, field.nameStart, field.nameLength, name)
            }
        }
    }

    /// The name of the field at `index` as written.
    public func name(at index: Int) -> String {
        let field = fields[index]
        return string(Int(field.nameStart), Int(field.nameLength))
    }

    /// The value of the field at `index` (surrounding whitespace removed when parsed).
    public func value(at index: Int) -> String {
        let field = fields[index]
        return string(Int(field.valueStart), Int(field.valueLength))
    }

    // MARK: - Internal byte access

    /// Whether both values hold the very same storage and field arrays: one was copied from the
    /// other and neither changed since (a change copies shared arrays first), so they are equal.
    func sharesStorage(with other: HTTPHeaders) -> Bool {
        storage.withUnsafeBufferPointer { mine in
            other.storage.withUnsafeBufferPointer { mine.baseAddress == $0.baseAddress && mine.count == $0.count }
        } && fields.withUnsafeBufferPointer { mine in
            other.fields.withUnsafeBufferPointer { mine.baseAddress == $0.baseAddress && mine.count == $0.count }
        }
    }

    func firstIndex(of name: String) -> Int? {
        // Lengths first: most lookups (Parse reads seven headers per request) match no field,
        // and comparing a length is far cheaper than borrowing the name's bytes.
        let length = UInt32(truncatingIfNeeded: name.utf8.count)
        var name = name
        return name.withUTF8 { name in
            storage.withUnsafeBufferPointer { bytes in
                for index in fields.indices where fields[index].nameLength == length {
                    if HTTPHeaders.nameEquals(bytes, at: Int(fields[index].nameStart), name) { return index }
                }
                return nil
            }
        }
    }

    func nameMatches(_ index: Int, _ name: String) -> Bool {
        let field = fields[index]
        return storage.withUnsafeBufferPointer { bytes in
            HTTPHeaders.bytesEqualCaseInsensitive(bytes, field.nameStart, field.nameLength, name)
        }
    }

    /// Whether the field at `index` is named `lowercaseLiteral` (ASCII case-insensitive).
    func nameIs(_ index: Int, _ lowercaseLiteral: StaticString) -> Bool {
        let field = fields[index]
        return storage.withUnsafeBufferPointer { bytes in
            HTTPCharacterClass.equalsCaseInsensitive(
                UnsafeBufferPointer(rebasing: bytes[Int(field.nameStart)..<Int(field.nameStart + field.nameLength)]),
                lowercaseLiteral)
        }
    }

    /// `containsToken(_:in:)` for literals: whether a `lowercaseName` field's list has `lowercaseToken`.
    func containsToken(_ lowercaseToken: StaticString, inField lowercaseName: StaticString) -> Bool {
        for index in fields.indices where Int(fields[index].nameLength) == lowercaseName.utf8CodeUnitCount && nameIs(index, lowercaseName) {
            let found = withValueBytes(at: index) { value in
                var found = false
                HTTPHeaders.forEachListElement(value) { element in
                    if !found, HTTPCharacterClass.equalsCaseInsensitive(element, lowercaseToken) { found = true }
                }
                return found
            }
            if found { return true }
        }
        return false
    }

    func withValueBytes<R>(at index: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let field = fields[index]
        return try storage.withUnsafeBufferPointer { bytes in
            try body(UnsafeBufferPointer(rebasing: bytes[Int(field.valueStart)..<Int(field.valueStart + field.valueLength)]))
        }
    }

    func string(_ start: Int, _ length: Int) -> String {
        storage.withUnsafeBufferPointer { bytes in
            String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<(start + length)]), as: UTF8.self)
        }
    }

    static func bytesEqualCaseInsensitive(_ bytes: UnsafeBufferPointer<UInt8>, _ start: UInt32, _ length: UInt32, _ name: String) -> Bool {
        var name = name
        return name.withUTF8 { other in
            other.count == Int(length) && nameEquals(bytes, at: Int(start), other)
        }
    }

    /// Whether `bytes` from `start` begin with `name`, ignoring ASCII case (the caller checked
    /// that they hold enough bytes).
    @inline(__always)
    static func nameEquals(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int, _ name: UnsafeBufferPointer<UInt8>) -> Bool {
        // Names are mostly sent in the case they are looked up in: eight equal bytes at a time,
        // then byte by byte (folding case) from the first word that differs.
        var offset = 0
        while name.count - offset >= 8,
              HTTPWordScan.load(bytes, at: start + offset) == HTTPWordScan.load(name, at: offset) {
            offset += 8
        }
        while offset < name.count {
            let byte = name[offset]
            let other = bytes[start + offset]
            if byte != other, HTTPCharacterClass.lowercased(byte) != HTTPCharacterClass.lowercased(other) { return false }
            offset += 1
        }
        return true
    }

    /// Whether a comma-separated list value contains `token`, ignoring ASCII case and optional whitespace.
    static func listContains(_ value: UnsafeBufferPointer<UInt8>, _ token: String) -> Bool {
        var found = false
        forEachListElement(value) { element in
            if !found, bytesEqualCaseInsensitive(element, 0, UInt32(element.count), token) { found = true }
        }
        return found
    }

    /// Calls `body` with each element of a comma-separated list, whitespace trimmed, empty ones skipped.
    static func forEachListElement<E: Error>(_ value: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) throws(E) -> Void) throws(E) {
        var start = 0
        while start <= value.count {
            var end = start
            while end < value.count, value[end] != .comma { end += 1 }
            var lower = start
            var upper = end
            while lower < upper, HTTPCharacterClass.isWhitespace(value[lower]) { lower += 1 }
            while upper > lower, HTTPCharacterClass.isWhitespace(value[upper - 1]) { upper -= 1 }
            if upper > lower { try body(UnsafeBufferPointer(rebasing: value[lower..<upper])) }
            start = end + 1
        }
    }
}

extension HTTPHeaders: Sequence {
    public struct Iterator: IteratorProtocol {
        let headers: HTTPHeaders
        var index = 0

        public mutating func next() -> (name: String, value: String)? {
            guard index < headers.fields.count else { return nil }
            defer { index += 1 }
            return (headers.name(at: index), headers.value(at: index))
        }
    }

    public func makeIterator() -> Iterator { Iterator(headers: self) }

    public var underestimatedCount: Int { fields.count }
}

extension HTTPHeaders: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }
}

extension HTTPHeaders: Equatable {
    /// Same fields in the same order (names compared exactly as written).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for index in 0..<lhs.count where lhs.name(at: index) != rhs.name(at: index) || lhs.value(at: index) != rhs.value(at: index) {
            return false
        }
        return true
    }
}

extension HTTPHeaders: CustomStringConvertible {
    public var description: String {
        "[" + map { "\($0.name): \($0.value)" }.joined(separator: ", ") + "]"
    }
}
