/// The top-level members of a JSON object's text, read without building values.
///
/// For copying a document that is already JSON (PostgreSQL's `jsonb` output) into a response:
/// finds with many rows spent most of their time parsing each row's data and printing it again.
/// The scan checks structure (quotes, bracket balance, separators), not the grammar of every
/// scalar, so it is meant for text a JSON producer wrote.
public enum JSONObjectText {
    /// Calls `member` with each top-level member's key (the bytes between its quotes, escapes
    /// left as they are) and value (its text, which may contain insignificant whitespace).
    /// Returns false, possibly after some calls, when `text` is not one well-formed object.
    public static func forEachMember(
        _ text: UnsafeBufferPointer<UInt8>,
        _ member: (_ key: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void
    ) -> Bool {
        var index = skipWhitespace(text, 0)
        guard index < text.count, text[index] == UInt8(ascii: "{") else { return false }
        index = skipWhitespace(text, index + 1)
        if index < text.count, text[index] == UInt8(ascii: "}") {
            return skipWhitespace(text, index + 1) == text.count
        }
        while true {
            guard index < text.count, text[index] == UInt8(ascii: "\""), let keyEnd = endOfString(text, index) else { return false }
            let key = UnsafeBufferPointer(rebasing: text[(index + 1)..<(keyEnd - 1)])
            index = skipWhitespace(text, keyEnd)
            guard index < text.count, text[index] == UInt8(ascii: ":") else { return false }
            let valueStart = skipWhitespace(text, index + 1)
            guard let valueEnd = endOfValue(text, valueStart) else { return false }
            member(key, UnsafeBufferPointer(rebasing: text[valueStart..<valueEnd]))
            index = skipWhitespace(text, valueEnd)
            guard index < text.count else { return false }
            if text[index] == UInt8(ascii: "}") { return skipWhitespace(text, index + 1) == text.count }
            guard text[index] == UInt8(ascii: ",") else { return false }
            index = skipWhitespace(text, index + 1)
        }
    }

    /// Appends `value` (a value from `forEachMember`) without its insignificant whitespace.
    public static func appendCompact(_ value: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        var inString = false
        var escaped = false
        var runStart = 0
        for index in 0..<value.count {
            let byte = value[index]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if isWhitespace(byte) {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: value[runStart..<index]))
                runStart = index + 1
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: value[runStart...]))
    }

    /// The index after the string whose opening quote is at `start`, or nil if it never closes.
    private static func endOfString(_ text: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int? {
        var index = start + 1
        while index < text.count {
            switch text[index] {
            case UInt8(ascii: "\""): return index + 1
            case UInt8(ascii: "\\"): index += 2
            case 0..<0x20: return nil
            default: index += 1
            }
        }
        return nil
    }

    /// The index after the value starting at `start`: a string, a nested object or array (up to
    /// the bracket that balances its first), or a scalar running to the next separator.
    private static func endOfValue(_ text: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int? {
        guard start < text.count else { return nil }
        switch text[start] {
        case UInt8(ascii: "\""):
            return endOfString(text, start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var index = start
            while index < text.count {
                switch text[index] {
                case UInt8(ascii: "\""):
                    guard let end = endOfString(text, index) else { return nil }
                    index = end
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                default: break
                }
                index += 1
            }
            return nil
        default:
            var index = start
            while index < text.count {
                let byte = text[index]
                if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || isWhitespace(byte) { break }
                guard byte != UInt8(ascii: "\""), byte != UInt8(ascii: "{"), byte != UInt8(ascii: "["), byte != UInt8(ascii: ":") else { return nil }
                index += 1
            }
            return index > start ? index : nil
        }
    }

    private static func skipWhitespace(_ text: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int {
        var index = start
        while index < text.count, isWhitespace(text[index]) { index += 1 }
        return index
    }

    @inline(__always)
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}
