/// Rewrites PCRE `\Q…\E` literal blocks into escaped PostgreSQL regex text.
///
/// Every official Parse SDK sends `contains`/`startsWith`/`endsWith` as `\Q<text>\E`, which
/// PostgreSQL's ARE syntax does not know. Inside a block each ASCII non-alphanumeric character is
/// prefixed with `\` (ARE: `\` before a non-alphanumeric matches it literally, also under `x`);
/// a block without `\E` runs to the end of the pattern (as in PCRE); a stray `\E` is dropped.
enum RegexLiteralBlocks {
    static func rewrite(_ pattern: String) -> String {
        guard pattern.utf8.contains(UInt8(ascii: "\\")) else { return pattern }
        var result = ""
        result.reserveCapacity(pattern.utf8.count)
        let scalars = Array(pattern.unicodeScalars)
        var literal = false
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            let next: Unicode.Scalar? = index + 1 < scalars.count ? scalars[index + 1] : nil
            if scalar == "\\", next == "E" {
                literal = false
                index += 2
            } else if literal {
                appendLiteral(scalar, to: &result)
                index += 1
            } else if scalar == "\\", let next {
                if next != "Q" {
                    result.unicodeScalars.append(scalar)
                    result.unicodeScalars.append(next)
                }
                literal = next == "Q"
                index += 2
            } else {
                result.unicodeScalars.append(scalar)
                index += 1
            }
        }
        return result
    }

    private static func appendLiteral(_ scalar: Unicode.Scalar, to result: inout String) {
        if scalar.isASCII, !(scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) {
            result.unicodeScalars.append("\\")
        }
        result.unicodeScalars.append(scalar)
    }
}
