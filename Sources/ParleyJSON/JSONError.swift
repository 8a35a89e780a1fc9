/// Where in the input a parse error was found.
public struct JSONPosition: Sendable, Hashable, CustomStringConvertible {
    /// Zero-based byte offset into the input.
    public var offset: Int
    /// One-based line number (lines end at `\n`).
    public var line: Int
    /// One-based column, counted in bytes.
    public var column: Int

    public init(offset: Int, line: Int, column: Int) {
        self.offset = offset
        self.line = line
        self.column = column
    }

    public var description: String { "line \(line), column \(column) (byte \(offset))" }
}

/// Why `JSONParser` rejected its input.
public enum JSONError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The input ended inside a value (or was empty).
    case unexpectedEnd(at: JSONPosition)
    /// A byte that cannot appear here, such as a trailing comma or an unquoted key.
    case unexpectedByte(UInt8, at: JSONPosition)
    /// A malformed UTF-8 sequence: overlong, surrogate, above U+10FFFF, truncated or stray.
    case invalidUTF8(at: JSONPosition)
    /// An unescaped control character (U+0000 to U+001F) inside a string.
    case controlCharacterInString(at: JSONPosition)
    /// A backslash escape that is not one of `\" \\ \/ \b \f \n \r \t \uXXXX`.
    case invalidEscape(at: JSONPosition)
    /// A `\u` escape of a UTF-16 surrogate that is not part of a valid high-low pair.
    case loneSurrogate(at: JSONPosition)
    /// A number that breaks the grammar: leading zero, missing digits, `+1`, `.5`, `1.`.
    case invalidNumber(at: JSONPosition)
    /// A number too large in magnitude for a `Double` (such as `1e400`).
    case numberOutOfRange(at: JSONPosition)
    /// The input starts with a UTF-8 byte order mark, which RFC 8259 forbids senders to add.
    case byteOrderMark(at: JSONPosition)
    /// Something other than whitespace follows the top-level value.
    case trailingData(at: JSONPosition)
    /// Arrays and objects nest deeper than the parser's `maxDepth`.
    case depthLimitExceeded(limit: Int, at: JSONPosition)
    /// The input is longer than the parser's `maxBytes`; nothing was parsed.
    case tooLarge(size: Int, limit: Int)

    /// Where the error was found; `nil` for `tooLarge`.
    public var position: JSONPosition? {
        switch self {
        case .unexpectedEnd(let position), .unexpectedByte(_, let position), .invalidUTF8(let position),
            .controlCharacterInString(let position), .invalidEscape(let position),
            .loneSurrogate(let position), .invalidNumber(let position), .numberOutOfRange(let position),
            .byteOrderMark(let position), .trailingData(let position),
            .depthLimitExceeded(_, let position):
            return position
        case .tooLarge:
            return nil
        }
    }

    /// A short human-readable reason, without the position.
    public var reason: String {
        switch self {
        case .unexpectedEnd:
            return "unexpected end of input"
        case .unexpectedByte(let byte, _):
            if byte >= 0x21 && byte < 0x7F {
                return "unexpected character '\(Character(Unicode.Scalar(byte)))'"
            }
            return "unexpected byte 0x\(String(byte, radix: 16, uppercase: true))"
        case .invalidUTF8:
            return "invalid UTF-8"
        case .controlCharacterInString:
            return "unescaped control character in string"
        case .invalidEscape:
            return "invalid escape sequence"
        case .loneSurrogate:
            return "unpaired UTF-16 surrogate escape"
        case .invalidNumber:
            return "invalid number"
        case .numberOutOfRange:
            return "number out of range"
        case .byteOrderMark:
            return "byte order mark not allowed"
        case .trailingData:
            return "unexpected data after the JSON value"
        case .depthLimitExceeded(let limit, _):
            return "nesting deeper than \(limit)"
        case .tooLarge(let size, let limit):
            return "document of \(size) bytes exceeds the limit of \(limit)"
        }
    }

    public var description: String {
        guard let position else { return "invalid JSON: \(reason)" }
        return "invalid JSON: \(reason) at \(position)"
    }
}
