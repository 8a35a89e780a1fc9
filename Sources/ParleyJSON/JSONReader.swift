/// The parsing state for one document: a cursor over borrowed bytes.
///
/// Containers are parsed with an explicit stack (`frames`, plus flat `values` and `keys`
/// stacks holding the members of every open container), so depth costs heap, not call stack.
struct JSONReader {
    private let base: UnsafeRawPointer
    private let end: Int
    private let maxDepth: Int
    private var offset = 0
    /// Reused buffer for strings that contain escapes.
    private var scratch: [UInt8] = []

    /// An open array or object.
    private struct Frame {
        var isObject: Bool
        /// Where this container's members start in `values`.
        var valueStart: Int
        /// Where this object's keys start in `keys`.
        var keyStart: Int
    }

    init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        // An empty buffer may have no base address; `end == 0` keeps it from being read.
        self.base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        self.end = bytes.count
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONError) -> JSONValue {
        if end >= 3 && byte(0) == 0xEF && byte(1) == 0xBB && byte(2) == 0xBF {
            throw .byteOrderMark(at: position(0))
        }
        let value = try parseValue()
        skipWhitespace()
        guard offset == end else {
            throw .trailingData(at: position(offset))
        }
        return value
    }

    // MARK: - Structure

    private mutating func parseValue() throws(JSONError) -> JSONValue {
        if let object = parseFlatObject() {
            return .object(object)
        }
        var frames: [Frame] = []
        var values: [JSONValue] = []
        var keys: [String] = []

        parsing: while true {
            skipWhitespace()
            guard offset < end else {
                throw .unexpectedEnd(at: position(offset))
            }
            var value: JSONValue
            let first = byte(offset)
            switch first {
            case UInt8(ascii: "{"):
                guard frames.count < maxDepth else {
                    throw .depthLimitExceeded(limit: maxDepth, at: position(offset))
                }
                offset += 1
                skipWhitespace()
                if offset < end && byte(offset) == UInt8(ascii: "}") {
                    offset += 1
                    value = .object(JSONObject())
                } else {
                    frames.append(Frame(isObject: true, valueStart: values.count, keyStart: keys.count))
                    keys.append(try parseKey())
                    continue parsing
                }
            case UInt8(ascii: "["):
                guard frames.count < maxDepth else {
                    throw .depthLimitExceeded(limit: maxDepth, at: position(offset))
                }
                offset += 1
                skipWhitespace()
                if offset < end && byte(offset) == UInt8(ascii: "]") {
                    offset += 1
                    value = .array([])
                } else {
                    frames.append(Frame(isObject: false, valueStart: values.count, keyStart: keys.count))
                    continue parsing
                }
            default:
                value = try parseScalar()
            }

            // Hand the finished value to its container; close every container that ends here.
            while let frame = frames.last {
                values.append(value)
                skipWhitespace()
                guard offset < end else {
                    throw .unexpectedEnd(at: position(offset))
                }
                let separator = byte(offset)
                if separator == UInt8(ascii: ",") {
                    offset += 1
                    if frame.isObject {
                        keys.append(try parseKey())
                    }
                    continue parsing
                }
                if frame.isObject && separator == UInt8(ascii: "}") {
                    offset += 1
                    let count = values.count - frame.valueStart
                    var object = JSONObject(minimumCapacity: count)
                    for member in 0..<count {
                        object.updateValue(values[frame.valueStart + member], forKey: keys[frame.keyStart + member])
                    }
                    values.removeLast(count)
                    keys.removeLast(count)
                    frames.removeLast()
                    value = .object(object)
                } else if !frame.isObject && separator == UInt8(ascii: "]") {
                    offset += 1
                    let elements = Array(values[frame.valueStart...])
                    values.removeLast(elements.count)
                    frames.removeLast()
                    value = .array(elements)
                } else {
                    throw unexpected(at: offset)
                }
            }
            return value
        }
    }

    /// An object whose members are all scalars (most request and `data` objects), parsed
    /// without the container stacks. Nil, with the cursor left where it was, for anything else,
    /// including any error: the general parser then parses it (and reports the error) as always.
    private mutating func parseFlatObject() -> JSONObject? {
        let start = offset
        skipWhitespace()
        guard maxDepth > 0, offset < end, byte(offset) == UInt8(ascii: "{") else {
            offset = start
            return nil
        }
        offset += 1
        var object = JSONObject(minimumCapacity: 8)
        do throws(JSONError) {
            skipWhitespace()
            if offset < end && byte(offset) == UInt8(ascii: "}") {
                offset += 1
                return object
            }
            while true {
                let key = try parseKey()
                skipWhitespace()
                guard offset < end else { break }
                let first = byte(offset)
                guard first != UInt8(ascii: "{"), first != UInt8(ascii: "[") else { break }
                let value = try parseScalar()
                object.updateValue(value, forKey: key)
                skipWhitespace()
                guard offset < end else { break }
                let separator = byte(offset)
                offset += 1
                if separator == UInt8(ascii: "}") { return object }
                guard separator == UInt8(ascii: ",") else { break }
            }
        } catch {}
        offset = start
        return nil
    }

    /// A string, number, `true`, `false` or `null` at the cursor.
    private mutating func parseScalar() throws(JSONError) -> JSONValue {
        switch byte(offset) {
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw unexpected(at: offset)
        }
    }

    /// Parses `"key" :` and leaves the cursor after the colon.
    private mutating func parseKey() throws(JSONError) -> String {
        skipWhitespace()
        guard offset < end, byte(offset) == UInt8(ascii: "\"") else {
            throw unexpected(at: offset)
        }
        let key = try parseString()
        skipWhitespace()
        guard offset < end, byte(offset) == UInt8(ascii: ":") else {
            throw unexpected(at: offset)
        }
        offset += 1
        return key
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONError) {
        let bytes = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for (index, expected) in bytes.enumerated() where offset + index >= end || byte(offset + index) != expected {
            throw unexpected(at: offset + index)
        }
        offset += bytes.count
    }

    private mutating func skipWhitespace() {
        while offset < end {
            switch byte(offset) {
            case 0x20, 0x0A, 0x0D, 0x09:
                offset += 1
            default:
                return
            }
        }
    }

    // MARK: - Strings

    /// Parses a string starting at its opening quote.
    private mutating func parseString() throws(JSONError) -> String {
        var index = offset + 1
        var runStart = index
        var hasEscapes = false
        while true {
            while index + 8 <= end && !JSONWordScan.needsAttention(base.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                index += 8
            }
            guard index < end else {
                throw .unexpectedEnd(at: position(end))
            }
            let current = byte(index)
            if current == UInt8(ascii: "\"") {
                offset = index + 1
                let run = UnsafeRawBufferPointer(start: base + runStart, count: index - runStart)
                if !hasEscapes {
                    return String(decoding: run, as: UTF8.self)
                }
                scratch.append(contentsOf: run)
                return String(decoding: scratch, as: UTF8.self)
            }
            if current == UInt8(ascii: "\\") {
                if !hasEscapes {
                    hasEscapes = true
                    scratch.removeAll(keepingCapacity: true)
                }
                scratch.append(contentsOf: UnsafeRawBufferPointer(start: base + runStart, count: index - runStart))
                index = try appendEscape(at: index)
                runStart = index
            } else if current < 0x20 {
                throw .controlCharacterInString(at: position(index))
            } else if current < 0x80 {
                index += 1
            } else {
                index = try endOfUTF8Sequence(at: index)
            }
        }
    }

    /// Appends the character of the escape at `index` (a backslash) and returns the next index.
    private mutating func appendEscape(at index: Int) throws(JSONError) -> Int {
        guard index + 1 < end else {
            throw .unexpectedEnd(at: position(end))
        }
        let escaped = byte(index + 1)
        switch escaped {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
            scratch.append(escaped)
        case UInt8(ascii: "b"):
            scratch.append(0x08)
        case UInt8(ascii: "f"):
            scratch.append(0x0C)
        case UInt8(ascii: "n"):
            scratch.append(0x0A)
        case UInt8(ascii: "r"):
            scratch.append(0x0D)
        case UInt8(ascii: "t"):
            scratch.append(0x09)
        case UInt8(ascii: "u"):
            return try appendUnicodeEscape(at: index)
        default:
            throw .invalidEscape(at: position(index))
        }
        return index + 2
    }

    /// Handles `\uXXXX` at `index`, pairing a high surrogate with the `\uXXXX` that must follow.
    private mutating func appendUnicodeEscape(at index: Int) throws(JSONError) -> Int {
        let unit = try hexQuad(at: index + 2)
        var scalar = UInt32(unit)
        var next = index + 6
        switch unit {
        case 0xD800...0xDBFF:
            guard next + 1 < end else {
                let cutShort = next == end || byte(next) == UInt8(ascii: "\\")
                throw cutShort ? .unexpectedEnd(at: position(end)) : .loneSurrogate(at: position(index))
            }
            guard byte(next) == UInt8(ascii: "\\"), byte(next + 1) == UInt8(ascii: "u") else {
                throw .loneSurrogate(at: position(index))
            }
            let low = try hexQuad(at: next + 2)
            guard (0xDC00...0xDFFF).contains(low) else {
                throw .loneSurrogate(at: position(index))
            }
            scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            next += 6
        case 0xDC00...0xDFFF:
            throw .loneSurrogate(at: position(index))
        default:
            break
        }
        appendUTF8(scalar)
        return next
    }

    private func hexQuad(at index: Int) throws(JSONError) -> UInt16 {
        var unit: UInt16 = 0
        for digitIndex in index..<index + 4 {
            guard digitIndex < end else {
                throw .unexpectedEnd(at: position(end))
            }
            let digit = byte(digitIndex)
            let value: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"):
                value = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                value = digit - UInt8(ascii: "A") + 10
            default:
                throw .invalidEscape(at: position(digitIndex))
            }
            unit = unit << 4 | UInt16(value)
        }
        return unit
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Validates the multi-byte UTF-8 sequence at `index` (Unicode Table 3-7) and returns
    /// the index after it.
    private func endOfUTF8Sequence(at index: Int) throws(JSONError) -> Int {
        let lead = byte(index)
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF:
            length = 2
        case 0xE0:
            length = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF:
            length = 3
        case 0xED:
            length = 3
            secondRange = 0x80...0x9F
        case 0xF0:
            length = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3:
            length = 4
        case 0xF4:
            length = 4
            secondRange = 0x80...0x8F
        default:
            throw .invalidUTF8(at: position(index))
        }
        guard index + length <= end, secondRange.contains(byte(index + 1)) else {
            throw .invalidUTF8(at: position(index))
        }
        for continuation in index + 2 ..< index + length where byte(continuation) & 0xC0 != 0x80 {
            throw .invalidUTF8(at: position(index))
        }
        return index + length
    }

    // MARK: - Numbers

    /// The most significant digits a `UInt64` mantissa always holds.
    private static let maxMantissaDigits = 19

    /// Exact powers of ten for the fast path: 10^0 ... 10^22 are all exact doubles.
    private static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    private mutating func parseNumber() throws(JSONError) -> JSONValue {
        let start = offset
        var index = offset
        let isNegative = byte(index) == UInt8(ascii: "-")
        if isNegative {
            index += 1
        }
        var mantissa: UInt64 = 0
        var mantissaDigits = 0
        var droppedDigits = false
        var fractionDigits = 0

        guard index < end else {
            throw .unexpectedEnd(at: position(end))
        }
        if byte(index) == UInt8(ascii: "0") {
            index += 1
            if index < end && Self.isDigit(byte(index)) {
                throw .invalidNumber(at: position(start))
            }
        } else if Self.isDigit(byte(index)) {
            while index < end, Self.isDigit(byte(index)) {
                Self.accumulate(byte(index), into: &mantissa, digits: &mantissaDigits, dropped: &droppedDigits)
                index += 1
            }
        } else {
            throw .invalidNumber(at: position(start))
        }

        var isInteger = true
        if index < end && byte(index) == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < end, Self.isDigit(byte(index)) else {
                throw .invalidNumber(at: position(start))
            }
            while index < end, Self.isDigit(byte(index)) {
                Self.accumulate(byte(index), into: &mantissa, digits: &mantissaDigits, dropped: &droppedDigits)
                fractionDigits += 1
                index += 1
            }
        }

        var exponent = 0
        if index < end && (byte(index) | 0x20) == UInt8(ascii: "e") {
            isInteger = false
            index += 1
            var exponentIsNegative = false
            if index < end && (byte(index) == UInt8(ascii: "+") || byte(index) == UInt8(ascii: "-")) {
                exponentIsNegative = byte(index) == UInt8(ascii: "-")
                index += 1
            }
            guard index < end, Self.isDigit(byte(index)) else {
                throw .invalidNumber(at: position(start))
            }
            while index < end, Self.isDigit(byte(index)) {
                if exponent < 1_000_000 {
                    exponent = exponent * 10 + Int(byte(index) - UInt8(ascii: "0"))
                }
                index += 1
            }
            if exponentIsNegative {
                exponent = -exponent
            }
        }
        offset = index

        if isInteger && !droppedDigits {
            if isNegative {
                if mantissa == 0 {
                    return .double(-0.0)
                }
                if mantissa <= UInt64(Int64.max) + 1 {
                    return .int(Int64(truncatingIfNeeded: 0 &- mantissa))
                }
            } else if mantissa <= UInt64(Int64.max) {
                return .int(Int64(mantissa))
            }
        }

        // Clinger's fast path: an exact mantissa times an exact power of ten rounds once.
        let decimalExponent = exponent - fractionDigits
        if !droppedDigits && mantissa <= 1 << 53 && (-22...22).contains(decimalExponent) {
            var result = Double(mantissa)
            if decimalExponent >= 0 {
                result *= Self.powersOfTen[decimalExponent]
            } else {
                result /= Self.powersOfTen[-decimalExponent]
            }
            return .double(isNegative ? -result : result)
        }
        if mantissa == 0 && !droppedDigits {
            return .double(isNegative ? -0.0 : 0.0)
        }

        let text = String(decoding: UnsafeRawBufferPointer(start: base + start, count: index - start), as: UTF8.self)
        guard let result = Double(text) else {
            throw .invalidNumber(at: position(start))
        }
        guard result.isFinite else {
            throw .numberOutOfRange(at: position(start))
        }
        return .double(result)
    }

    @inline(__always)
    private static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// Adds one digit to the mantissa, skipping leading zeros and noting digits beyond 19.
    @inline(__always)
    private static func accumulate(_ digit: UInt8, into mantissa: inout UInt64, digits: inout Int, dropped: inout Bool) {
        let value = UInt64(digit - UInt8(ascii: "0"))
        if mantissa == 0 && value == 0 {
            return
        }
        if digits < maxMantissaDigits {
            mantissa = mantissa * 10 + value
            digits += 1
        } else {
            dropped = true
        }
    }

    // MARK: - Bytes and errors

    @inline(__always)
    private func byte(_ index: Int) -> UInt8 {
        base.load(fromByteOffset: index, as: UInt8.self)
    }

    /// The error for the byte at `index`, or for the end of input when `index` is past it.
    private func unexpected(at index: Int) -> JSONError {
        guard index < end else {
            return .unexpectedEnd(at: position(end))
        }
        return .unexpectedByte(byte(index), at: position(index))
    }

    /// Line and column of `index`, found by counting newlines (only done on error).
    private func position(_ index: Int) -> JSONPosition {
        var line = 1
        var lineStart = 0
        for scanned in 0..<min(index, end) where byte(scanned) == 0x0A {
            line += 1
            lineStart = scanned + 1
        }
        return JSONPosition(offset: index, line: line, column: index - lineStart + 1)
    }
}
