#if canImport(Glibc)
import Glibc
#endif

/// IMF-fixdate formatting for the `Date` header (RFC 9110 §5.6.7), without Foundation.
public enum HTTPDate {
    /// `Sun, 06 Nov 1994 08:49:37 GMT` for a Unix time.
    public static func format(secondsSinceEpoch seconds: Int) -> String {
        var bytes: [UInt8] = []
        write(secondsSinceEpoch: seconds, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func write(secondsSinceEpoch seconds: Int, into bytes: inout [UInt8]) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // 1970-01-01 was a Thursday.
        let weekday = ((days % 7) + 7 + 4) % 7
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        let weekdays: StaticString = "SunMonTueWedThuFriSat"
        let months: StaticString = "JanFebMarAprMayJunJulAugSepOctNovDec"
        bytes.append(contentsOf: UnsafeBufferPointer(start: weekdays.utf8Start + weekday * 3, count: 3))
        bytes.append(contentsOf: [0x2C, 0x20])
        appendDigits(day, 2, &bytes)
        bytes.append(0x20)
        bytes.append(contentsOf: UnsafeBufferPointer(start: months.utf8Start + (month - 1) * 3, count: 3))
        bytes.append(0x20)
        appendDigits(year, 4, &bytes)
        bytes.append(0x20)
        appendDigits(secondOfDay / 3600, 2, &bytes)
        bytes.append(0x3A)
        appendDigits(secondOfDay % 3600 / 60, 2, &bytes)
        bytes.append(0x3A)
        appendDigits(secondOfDay % 60, 2, &bytes)
        bytes.append(contentsOf: [0x20, 0x47, 0x4D, 0x54])
    }

    /// `20130524T000000Z` (ISO 8601 basic, UTC), the form AWS Signature V4 signs.
    public static func iso8601Basic(secondsSinceEpoch seconds: Int) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        var bytes: [UInt8] = []
        appendDigits(year, 4, &bytes)
        appendDigits(month, 2, &bytes)
        appendDigits(day, 2, &bytes)
        bytes.append(UInt8(ascii: "T"))
        appendDigits(secondOfDay / 3600, 2, &bytes)
        appendDigits(secondOfDay % 3600 / 60, 2, &bytes)
        appendDigits(secondOfDay % 60, 2, &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The Unix time of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`); nil for anything else.
    public static func parse(_ text: String) -> Int? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
              (1...31).contains(day), (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second) else { return nil }
        return daysSinceEpoch(year: year, month: monthIndex + 1, day: day) * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func appendDigits(_ value: Int, _ width: Int, _ bytes: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(0x30 + rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Proleptic Gregorian date from days since 1970-01-01 (Howard Hinnant's algorithm).
    static func civilDate(daysSinceEpoch days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// A ready-made `Date: …\r\n` header line, reformatted only when the second changes.
///
/// One per event loop: the serializer copies the cached bytes into every response head.
public struct HTTPDateCache: Sendable {
    public private(set) var headerLine: [UInt8] = []
    private var second = Int.min

    public init() {
        refresh()
    }

    /// Reformats the line if the wall-clock second moved on (or to `now` when given).
    public mutating func refresh(now: Int? = nil) {
        let current = now ?? Int(time(nil))
        guard current != second else { return }
        second = current
        headerLine.removeAll(keepingCapacity: true)
        headerLine.append(contentsOf: "Date: ".utf8)
        HTTPDate.write(secondsSinceEpoch: current, into: &headerLine)
        headerLine.append(contentsOf: [UInt8.cr, .lf])
    }
}
