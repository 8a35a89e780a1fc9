import ParleyPostgres

/// PostgreSQL one-dimensional array literals (parameters) and array output (results), text format.
enum SQLArray {
    /// `{"a","b\"c"}`: every element quoted, `"` and `\` escaped.
    static func literal<S: Sequence>(_ items: S) -> String where S.Element == String {
        PostgresText.arrayLiteral(Array(items))
    }

    /// `{1,2,3}`.
    static func literal<S: Sequence>(_ items: S) -> String where S.Element: BinaryInteger {
        var out = "{"
        var first = true
        for item in items {
            if !first { out += "," }
            first = false
            out += String(item)
        }
        return out + "}"
    }

    /// `{t,f}`.
    static func literal(_ items: [Bool]) -> String {
        "{" + items.map { $0 ? "t" : "f" }.joined(separator: ",") + "}"
    }

    /// Parses PostgreSQL's output of a one-dimensional text array (`{a,"b c",NULL}`); NULL
    /// elements are dropped. nil when the text is not such an array.
    static func parse(_ text: String) -> [String]? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return nil }
        var result: [String] = []
        var index = 1
        let end = bytes.count - 1
        if index == end { return [] }
        while index < end {
            var element: [UInt8] = []
            var quoted = false
            if bytes[index] == UInt8(ascii: "\"") {
                quoted = true
                index += 1
                while index < end, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\"), index + 1 < end { index += 1 }
                    element.append(bytes[index])
                    index += 1
                }
                guard index < end else { return nil }
                index += 1
            } else {
                while index < end, bytes[index] != UInt8(ascii: ",") {
                    element.append(bytes[index])
                    index += 1
                }
            }
            let value = String(decoding: element, as: UTF8.self)
            if quoted || value != "NULL" { result.append(value) }
            if index < end {
                guard bytes[index] == UInt8(ascii: ",") else { return nil }
                index += 1
            }
        }
        return result
    }
}
