extension JSONValue {
    /// The value as compact JSON text.
    public func serialized() -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        serialize(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the value as compact UTF-8 JSON to `bytes`.
    ///
    /// Object keys keep their order. Strings escape `"`, `\` and control characters (as
    /// `\b \f \n \r \t` or `\u00XX`) and keep all other characters as UTF-8; `/` is not
    /// escaped. Doubles print in the shortest form that reads back to the same value, with a
    /// fraction or exponent so they parse back as doubles (`1.0`, `1e+300`, `-0.0`); NaN and
    /// infinities have no JSON form and print as `null`. Nesting is serialized recursively,
    /// which is safe for anything the parser produces; keep values built in code shallow too.
    public func serialize(into bytes: inout [UInt8]) {
        JSONSerializer.write(self, into: &bytes)
    }
}

/// Writes JSON text straight into a byte array, with no intermediate `String` per value.
public enum JSONSerializer {
    static func write(_ value: JSONValue, into bytes: inout [UInt8]) {
        switch value {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let flag):
            bytes.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        case .int(let number):
            writeInteger(number, into: &bytes)
        case .double(let number):
            if number.isFinite {
                bytes.append(contentsOf: number.description.utf8)
            } else {
                bytes.append(contentsOf: "null".utf8)
            }
        case .string(let text):
            writeString(text, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 {
                    bytes.append(UInt8(ascii: ","))
                }
                write(element, into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            for (position, member) in object.enumerated() {
                if position > 0 {
                    bytes.append(UInt8(ascii: ","))
                }
                writeString(member.key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                write(member.value, into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    static func writeInteger(_ number: Int64, into bytes: inout [UInt8]) {
        if number < 0 {
            bytes.append(UInt8(ascii: "-"))
        }
        var magnitude = number.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// Appends `text` as a JSON string, escaped as `JSONValue.serialize` does.
    public static func writeString(_ text: String, into bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { writeString(utf8: $0, into: &bytes) }
    }

    /// `writeString` for text that is already UTF-8 bytes (a database cell), with no `String` made.
    public static func writeString(utf8: UnsafeBufferPointer<UInt8>, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        defer { bytes.append(UInt8(ascii: "\"")) }
        guard let base = utf8.baseAddress else { return }
        let count = utf8.count
        var runStart = 0
        var index = 0
        while index < count {
            // Most strings need no escape at all: skip them eight bytes at a time.
            while index + 8 <= count && !JSONWordScan.needsEscape(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) {
                index += 8
            }
            guard index < count else { break }
            let byte = base[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            bytes.append(contentsOf: UnsafeBufferPointer(start: base + runStart, count: index - runStart))
            index += 1
            runStart = index
            bytes.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(byte)
            case 0x08:
                bytes.append(UInt8(ascii: "b"))
            case 0x0C:
                bytes.append(UInt8(ascii: "f"))
            case 0x0A:
                bytes.append(UInt8(ascii: "n"))
            case 0x0D:
                bytes.append(UInt8(ascii: "r"))
            case 0x09:
                bytes.append(UInt8(ascii: "t"))
            default:
                bytes.append(contentsOf: "u00".utf8)
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0x0F))
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(start: base + runStart, count: count - runStart))
    }
}

extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes in one copy (JSON writers: keys and punctuation).
    @inlinable
    public mutating func append(_ literal: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}
