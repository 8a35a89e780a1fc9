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
        let (year, month, day) = civilDate(daysSinceEpoch: floorDiv(seconds, 86_400))
        let secondOfDay = seconds - floorDiv(seconds, 86_400) * 86_400
        let hour = Int(secondOfDay / 3600), minute = Int(secondOfDay % 3600 / 60), second = Int(secondOfDay % 60)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(milliseconds, 3))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (or `+00:00`) into milliseconds since the epoch.
    public static func parseISO8601(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int(b[i] - 48)
            }
            return v
        }
        guard b.count >= 20, let year = num(0, 4), b[4] == 45, let month = num(5, 2), b[7] == 45, let day = num(8, 2),
              b[10] == 84 || b[10] == 32, let hour = num(11, 2), b[13] == 58, let minute = num(14, 2), b[16] == 58,
              let second = num(17, 2), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var millis = 0
        if i < b.count, b[i] == 46 {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 3 { millis = millis * 10 + Int(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            var scale = digits
            while scale < 3 { millis *= 10; scale += 1 }
        }
        var offsetSeconds = 0
        if i < b.count, b[i] == 90 {
            i += 1
        } else if i < b.count, b[i] == 43 || b[i] == 45, let oh = num(i + 1, 2), b.count > i + 3, b[i + 3] == 58, let om = num(i + 4, 2) {
            offsetSeconds = (oh * 3600 + om * 60) * (b[i] == 43 ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        return seconds * 1000 + Int64(millis)
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
