/// Base64 (RFC 4648): the standard alphabet with padding, and the URL-safe one without (JWS).
public enum Base64 {
    private static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlSafe = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Standard base64 with `=` padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        String(decoding: encode(bytes, alphabet: standard, pad: true), as: UTF8.self)
    }

    /// URL-safe base64 without padding (`base64url` of RFC 7515).
    public static func encodeURL(_ bytes: [UInt8]) -> String {
        String(decoding: encode(bytes, alphabet: urlSafe, pad: false), as: UTF8.self)
    }

    /// Decodes standard base64 (padding required where the length needs it); nil if malformed.
    public static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        guard text.count % 4 == 0 else { return nil }
        var body = Array(text)
        var padding = 0
        while padding < 2, body.last == UInt8(ascii: "=") {
            body.removeLast()
            padding += 1
        }
        return decode(body, urlSafe: false)
    }

    /// Decodes URL-safe base64 without padding; nil if malformed (padding, other alphabet,
    /// an impossible length, or nonzero bits after the last byte).
    public static func decodeURL<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        decode(Array(text), urlSafe: true)
    }

    /// Whether `byte` is in the standard alphabet (not padding).
    public static func isAlphabet(_ byte: UInt8) -> Bool {
        value(of: byte, urlSafe: false) != nil
    }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            output.append(alphabet[Int(value >> 6 & 63)])
            output.append(alphabet[Int(value & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let value = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            if rest == 2 {
                output.append(alphabet[Int(value >> 6 & 63)])
            } else if pad {
                output.append(UInt8(ascii: "="))
            }
            if pad { output.append(UInt8(ascii: "=")) }
        }
        return output
    }

    /// Decodes unpadded characters of one alphabet.
    private static func decode(_ text: [UInt8], urlSafe: Bool) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            guard let value = value(of: byte, urlSafe: urlSafe) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // The bits left over must be zero (canonical encoding).
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    private static func value(of byte: UInt8, urlSafe: Bool) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+") where !urlSafe, UInt8(ascii: "-") where urlSafe: 62
        case UInt8(ascii: "/") where !urlSafe, UInt8(ascii: "_") where urlSafe: 63
        default: nil
        }
    }
}
