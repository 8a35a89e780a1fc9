import ParleyLog

/// Codecs for PostgreSQL's text format (the format the client sends parameters and receives rows in).
public enum PostgresText {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `bytea` hex input/output format: `\x` followed by two hex digits per byte.
    public static func hexBytea(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(2 + bytes.count * 2)
        out.append(UInt8(ascii: "\\"))
        out.append(UInt8(ascii: "x"))
        for b in bytes {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `bytea` text output (hex format, the default since PostgreSQL 9.0).
    public static func decodeBytea(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var i = 2
        while i < utf8.count {
            guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }

    /// A one-dimensional array literal with every element double-quoted: `{"a","b\"c"}`.
    public static func arrayLiteral(_ items: [String]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(2 + items.reduce(0) { $0 + $1.utf8.count + 3 })
        appendArrayLiteral(items, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `arrayLiteral(items)` to `bytes`.
    static func appendArrayLiteral(_ items: [String], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, item) in items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            for byte in item.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Parses `timestamptz`/`timestamp`/`date` output in the ISO DateStyle
    /// (`2024-05-06 07:08:09.123456+00`, `+05:30` offsets, `T` separator, or a bare date) into
    /// milliseconds since the epoch (UTC when no offset is given). nil for `infinity` and BC dates.
    public static func parseTimestamp(_ text: String) -> Int64? {
        UTCTime.parseTimestamp(text)
    }
}
