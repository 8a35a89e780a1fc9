#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock helpers in UTC, without Foundation.
public enum UTCTime {
    /// Milliseconds since the Unix epoch.
    public static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec / 1_000_000)
    }

    /// Formats a Unix time as ISO-8601 UTC with milliseconds (`2026-11-30T06:48:56.123Z`).
    public static func iso8601(milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        return iso8601(seconds: seconds, milliseconds: Int(milliseconds - seconds * 1000))
    }

    /// Formats seconds plus milliseconds as ISO-8601 UTC.
    public static func iso8601(seconds: Int64, milliseconds: Int) -> String {
        let days = floorDiv(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        let secondOfDay = Int(seconds - days * 86_400)
        let hour = secondOfDay / 3600, minute = secondOfDay % 3600 / 60, second = secondOfDay % 60
        guard (0...9999).contains(year), (0...999).contains(milliseconds) else {
            return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(milliseconds, 3))Z"
        }
        return String(unsafeUninitializedCapacity: 24) { buffer in
            writeISO8601(year: year, month: month, day: day, secondOfDay: secondOfDay, milliseconds: milliseconds, into: buffer)
            return 24
        }
    }

    /// Formats a Unix time as an RFC 5322 date in UTC (`Wed, 02 Dec 2026 00:01:24 +0000`), as mail headers want.
    public static func rfc5322(milliseconds: Int64) -> String {
        let seconds = floorDiv(milliseconds, 1000)
        let days = floorDiv(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        let secondOfDay = Int(seconds - days * 86_400)
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let weekday = weekdays[Int(((days % 7) + 7) % 7)]
        return "\(weekday), \(pad(day, 2)) \(months[month - 1]) \(year) \(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2)) +0000"
    }

    /// Appends `iso8601(milliseconds:)` to `bytes` (JSON writers: no `String` in between).
    public static func appendISO8601(milliseconds: Int64, to bytes: inout [UInt8]) {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = Int(milliseconds - seconds * 1000)
        let days = floorDiv(seconds, 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        guard (0...9999).contains(year) else {
            bytes.append(contentsOf: iso8601(seconds: seconds, milliseconds: millis).utf8)
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer in
            writeISO8601(year: year, month: month, day: day, secondOfDay: Int(seconds - days * 86_400), milliseconds: millis, into: buffer)
            bytes.append(contentsOf: buffer)
        }
    }

    /// Whether `text` is a `timestamptz` as PostgreSQL prints it in UTC with the ISO DateStyle
    /// (`2024-05-06 07:08:09.123456+00`, the fraction optional), a valid date and time in years
    /// 0000-9999: the text `appendISO8601(postgresUTC:to:)` rewrites.
    public static func isPostgresUTC(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = text.count
        // "YYYY-MM-DD HH:MM:SS", then "." and 1 to 6 digits or nothing, then "+00".
        guard count == 22 || (24...29).contains(count), let base = text.baseAddress,
              base[4] == UInt8(ascii: "-"), base[7] == UInt8(ascii: "-"), base[10] == UInt8(ascii: " "),
              base[13] == UInt8(ascii: ":"), base[16] == UInt8(ascii: ":"), count == 22 || base[19] == UInt8(ascii: "."),
              base[count - 3] == UInt8(ascii: "+"), base[count - 2] == UInt8(ascii: "0"), base[count - 1] == UInt8(ascii: "0")
        else { return false }
        // Digits as 0...9, anything else as 10 or more; wrapping arithmetic: this runs for every
        // row of a find.
        @inline(__always) func digit(_ index: Int) -> Int { Int(base[index] &- 48) }
        @inline(__always) func pair(_ index: Int) -> Int { digit(index) &* 10 &+ digit(index + 1) }
        var largestDigit = max(max(max(digit(0), digit(1)), max(digit(2), digit(3))), max(max(digit(5), digit(6)), max(digit(8), digit(9))))
        largestDigit = max(largestDigit, max(max(max(digit(11), digit(12)), max(digit(14), digit(15))), max(digit(17), digit(18))))
        for index in 20..<max(20, count - 3) { largestDigit = max(largestDigit, digit(index)) }
        guard largestDigit <= 9 else { return false }
        let year = pair(0) &* 100 &+ pair(2), month = pair(5), day = pair(8)
        return (1...12).contains(month) && day >= 1 && day <= daysInMonth(year: year, month: month)
            && pair(11) < 24 && pair(14) < 60 && pair(17) < 60
    }

    /// Appends PostgreSQL's UTC text of a `timestamptz`, which `isPostgresUTC` accepted, the
    /// way `appendISO8601(milliseconds:to:)` writes the same instant, by moving its digits instead
    /// of computing a date: every row of a find has two. Check once with `isPostgresUTC`, since a
    /// writer must know before it writes the member's key whether the value will follow.
    public static func appendISO8601(postgresUTC text: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        assert(isPostgresUTC(text), "not PostgreSQL's UTC timestamp text")
        let fractionEnd = text.count - 3
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[0..<10]))
        bytes.append(UInt8(ascii: "T"))
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[11..<19]))
        bytes.append(UInt8(ascii: "."))
        for index in 20..<23 { bytes.append(index < fractionEnd ? text[index] : UInt8(ascii: "0")) }
        bytes.append(UInt8(ascii: "Z"))
    }

    private static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The usual case (years 0-9999), written digit by digit into 24 bytes: this runs for every
    /// timestamp of every row a query returns.
    private static func writeISO8601(year: Int, month: Int, day: Int, secondOfDay: Int, milliseconds: Int,
                                     into buffer: UnsafeMutableBufferPointer<UInt8>) {
        func put(_ value: Int, width: Int, at offset: Int) {
            var rest = value
            for position in (offset..<(offset + width)).reversed() {
                buffer[position] = UInt8(truncatingIfNeeded: 48 + rest % 10)
                rest /= 10
            }
        }
        put(year, width: 4, at: 0)
        buffer[4] = UInt8(ascii: "-")
        put(month, width: 2, at: 5)
        buffer[7] = UInt8(ascii: "-")
        put(day, width: 2, at: 8)
        buffer[10] = UInt8(ascii: "T")
        put(secondOfDay / 3600, width: 2, at: 11)
        buffer[13] = UInt8(ascii: ":")
        put(secondOfDay % 3600 / 60, width: 2, at: 14)
        buffer[16] = UInt8(ascii: ":")
        put(secondOfDay % 60, width: 2, at: 17)
        buffer[19] = UInt8(ascii: ".")
        put(milliseconds, width: 3, at: 20)
        buffer[23] = UInt8(ascii: "Z")
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (or `+00:00`) into milliseconds since the epoch.
    public static func parseISO8601(_ text: String) -> Int64? {
        parseTimestamp(text)
    }

    /// Parses an ISO-8601 or PostgreSQL timestamp (`T` or space between date and time, optional
    /// fraction, `Z` or a `±HH[:MM[:SS]]` offset, or a bare date) into milliseconds since the
    /// epoch (UTC when no offset is given).
    public static func parseTimestamp(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parseTimestamp(bytes: $0) }
    }

    /// `parseTimestamp` over UTF-8 bytes (a database cell, a JSON string), with no copy.
    public static func parseTimestamp(bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        var cursor = TimestampCursor(bytes: bytes)
        guard let year = cursor.digits(4), cursor.expect(45), let month = cursor.digits(2), cursor.expect(45),
              let day = cursor.digits(2), (1...12).contains(month), (1...31).contains(day) else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        if cursor.atEnd { return days * 86_400_000 }
        guard cursor.expect(32) || cursor.expect(84), let hour = cursor.digits(2), cursor.expect(58),
              let minute = cursor.digits(2), cursor.expect(58), let second = cursor.digits(2),
              hour < 25, minute < 60, second < 61 else { return nil }
        var millis = 0
        if cursor.expect(46) {
            var count = 0
            while let digit = cursor.digit() {
                if count < 3 { millis = millis * 10 + digit }
                count += 1
            }
            guard count > 0 else { return nil }
            var scale = count
            while scale < 3 { millis *= 10; scale += 1 }
        }
        var offset = 0
        if !cursor.expect(90), !cursor.atEnd {
            let sign: Int
            if cursor.expect(43) {
                sign = 1
            } else if cursor.expect(45) {
                sign = -1
            } else {
                return nil
            }
            guard let oh = cursor.digits(2) else { return nil }
            var seconds = oh * 3600
            if cursor.expect(58) {
                guard let om = cursor.digits(2) else { return nil }
                seconds += om * 60
                if cursor.expect(58) {
                    guard let os = cursor.digits(2) else { return nil }
                    seconds += os
                }
            }
            offset = sign * seconds
        }
        guard cursor.atEnd else { return nil }
        let secondsOfDay = Int64(hour * 3600 + minute * 60 + second - offset)
        return (days * 86_400 + secondsOfDay) * 1000 + Int64(millis)
    }

    /// Reads a timestamp's fields left to right.
    private struct TimestampCursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index == bytes.count }

        /// The next byte as a digit value, consuming it; nil (consuming nothing) for a non-digit.
        mutating func digit() -> Int? {
            guard index < bytes.count else { return nil }
            let value = bytes[index] &- 48
            guard value < 10 else { return nil }
            index += 1
            return Int(value)
        }

        /// Exactly `count` digits as a number.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - index >= count else { return nil }
            var value = 0
            for _ in 0..<count {
                let digit = bytes[index] &- 48
                guard digit < 10 else { return nil }
                value = value * 10 + Int(digit)
                index += 1
            }
            return value
        }

        /// Consumes `byte` when it is next.
        mutating func expect(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    public static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilDate(daysSinceEpoch days: Int64) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : (a - b + 1) / b }

    static func pad(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
