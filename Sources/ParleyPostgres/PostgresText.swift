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
        var out = "{"
        for (i, item) in items.enumerated() {
            if i > 0 { out += "," }
            out += "\""
            for scalar in item.unicodeScalars {
                if scalar == "\"" || scalar == "\\" { out += "\\" }
                out.unicodeScalars.append(scalar)
            }
            out += "\""
        }
        return out + "}"
    }

    /// Parses `timestamptz`/`timestamp`/`date` output in the ISO DateStyle
    /// (`2024-05-06 07:08:09.123456+00`, `+05:30` offsets, `T` separator, or a bare date) into
    /// milliseconds since the epoch (UTC when no offset is given). nil for `infinity` and BC dates.
    public static func parseTimestamp(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var v = 0
            for k in i..<(i + count) {
                guard b[k] >= 48, b[k] <= 57 else { return nil }
                v = v * 10 + Int(b[k] - 48)
            }
            i += count
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(45), let month = digits(2), expect(45), let day = digits(2),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        let days = UTCTime.daysSinceEpoch(year: year, month: month, day: day)
        if i == b.count { return days * 86_400_000 }
        guard expect(32) || expect(84), let hour = digits(2), expect(58), let minute = digits(2), expect(58),
              let second = digits(2), hour < 25, minute < 60, second < 61 else { return nil }
        var millis = 0
        if expect(46) {
            var count = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if count < 3 { millis = millis * 10 + Int(b[i] - 48) }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            var scale = count
            while scale < 3 { millis *= 10; scale += 1 }
        }
        var offset = 0
        if i < b.count {
            if b[i] == 90 {
                i += 1
            } else {
                guard b[i] == 43 || b[i] == 45 else { return nil }
                let sign = b[i] == 43 ? 1 : -1
                i += 1
                guard let oh = digits(2) else { return nil }
                var seconds = oh * 3600
                if expect(58) {
                    guard let om = digits(2) else { return nil }
                    seconds += om * 60
                    if expect(58) {
                        guard let os = digits(2) else { return nil }
                        seconds += os
                    }
                }
                offset = sign * seconds
            }
        }
        guard i == b.count else { return nil }
        let secondsOfDay = Int64(hour * 3600 + minute * 60 + second - offset)
        return (days * 86_400 + secondsOfDay) * 1000 + Int64(millis)
    }
}
