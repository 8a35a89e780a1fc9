/// A JSON object: unique string keys mapped to values, kept in insertion order.
///
/// Setting a key that already exists replaces its value in place, so the key keeps its first
/// position (as JavaScript objects do). Keys are compared by their UTF-8 bytes, as JSON,
/// JavaScript and Postgres do, not by Swift's Unicode-equivalence `String ==`: `"é"` (U+00E9)
/// and `"e\u{301}"` are two different keys. Lookups scan linearly while the object is small
/// and go through a hash index once it has more than `indexThreshold` entries.
///
/// Equality ignores key order: two objects are equal when they hold the same keys with equal
/// values. Compare `keys` to check order.
public struct JSONObject: Sendable {
    /// One key and its value.
    public typealias Element = (key: String, value: JSONValue)

    /// Objects with more entries than this keep a hash index of their keys.
    static let indexThreshold = 12

    private var entries: [Element]
    private var index: [ByteKey: Int]?

    /// An empty object.
    public init() {
        entries = []
        index = nil
    }

    /// An empty object with room for `minimumCapacity` entries.
    public init(minimumCapacity: Int) {
        entries = []
        entries.reserveCapacity(minimumCapacity)
        index = nil
    }

    /// An object holding `pairs` in order; for a repeated key the last value wins, at the
    /// position of its first occurrence.
    public init<Pairs: Sequence>(_ pairs: Pairs) where Pairs.Element == (String, JSONValue) {
        self.init(minimumCapacity: pairs.underestimatedCount)
        for (key, value) in pairs {
            updateValue(value, forKey: key)
        }
    }

    /// The number of entries.
    public var count: Int { entries.count }

    /// Whether the object has no entries.
    public var isEmpty: Bool { entries.isEmpty }

    /// The keys, in order.
    public var keys: [String] { entries.map(\.key) }

    /// The values, in key order.
    public var values: [JSONValue] { entries.map(\.value) }

    /// The value for `key`; assigning `nil` removes the key, assign `.null` to store JSON null.
    public subscript(key: String) -> JSONValue? {
        get {
            guard let position = position(ofKey: key) else { return nil }
            return entries[position].value
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Sets the value for `key` (appending the key if new) and returns the value it replaced.
    @discardableResult
    public mutating func updateValue(_ value: JSONValue, forKey key: String) -> JSONValue? {
        if let position = position(ofKey: key) {
            let old = entries[position].value
            entries[position].value = value
            return old
        }
        entries.append((key: key, value: value))
        if index != nil {
            index![ByteKey(key)] = entries.count - 1
        } else if entries.count > Self.indexThreshold {
            rebuildIndex()
        }
        return nil
    }

    /// Removes `key` and returns its value; later keys move up one position. O(n).
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let position = position(ofKey: key) else { return nil }
        let old = entries.remove(at: position).value
        if entries.count > Self.indexThreshold {
            rebuildIndex()
        } else {
            index = nil
        }
        return old
    }

    /// Whether `key` is present.
    public func contains(key: String) -> Bool {
        position(ofKey: key) != nil
    }

    private func position(ofKey key: String) -> Int? {
        if let index {
            return index[ByteKey(key)]
        }
        for position in entries.indices where ByteKey.bytesEqual(entries[position].key, key) {
            return position
        }
        return nil
    }

    private mutating func rebuildIndex() {
        var index = [ByteKey: Int](minimumCapacity: entries.count)
        for (position, entry) in entries.enumerated() {
            index[ByteKey(entry.key)] = position
        }
        self.index = index
    }
}

extension JSONObject {
    /// A key that hashes and compares by UTF-8 bytes.
    private struct ByteKey: Hashable, Sendable {
        let string: String

        init(_ string: String) {
            self.string = string
        }

        static func == (lhs: ByteKey, rhs: ByteKey) -> Bool {
            bytesEqual(lhs.string, rhs.string)
        }

        func hash(into hasher: inout Hasher) {
            let hashed: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            }
            if hashed == nil {
                for byte in string.utf8 {
                    hasher.combine(byte)
                }
            }
            hasher.combine(string.utf8.count)
        }

        static func bytesEqual(_ lhs: String, _ rhs: String) -> Bool {
            let left = lhs.utf8
            let right = rhs.utf8
            guard left.count == right.count else { return false }
            let fast: Bool?? = left.withContiguousStorageIfAvailable { leftBytes in
                right.withContiguousStorageIfAvailable { rightBytes in
                    leftBytes.elementsEqual(rightBytes)
                }
            }
            if let fast, let fast {
                return fast
            }
            return left.elementsEqual(right)
        }
    }
}

extension JSONObject: RandomAccessCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { entries.count }

    public subscript(position: Int) -> Element { entries[position] }
}

extension JSONObject: Equatable {
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in lhs.entries {
            guard let other = rhs[key], other == value else { return false }
        }
        return true
    }
}

extension JSONObject: Hashable {
    /// Order-independent, to agree with `==`.
    public func hash(into hasher: inout Hasher) {
        var combined: UInt64 = 0
        for (key, value) in entries {
            var entryHasher = Hasher()
            entryHasher.combine(ByteKey(key))
            entryHasher.combine(value)
            combined &+= UInt64(UInt(bitPattern: entryHasher.finalize()))
        }
        hasher.combine(entries.count)
        hasher.combine(combined)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public typealias Key = String
    public typealias Value = JSONValue

    /// Keeps the literal's order; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }
}

extension JSONObject: CustomStringConvertible {
    /// The object serialized as compact JSON.
    public var description: String { JSONValue.object(self).serialized() }
}
