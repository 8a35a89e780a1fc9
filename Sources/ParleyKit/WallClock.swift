#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time in UTC milliseconds, and the ISO-8601 form Parley writes
/// (`2026-11-30T07:26:04.574Z`).
///
/// Not ParleyLog's `UTCTime`: that module imports only Glibc and uses `Synchronization`, which
/// would raise the SDK's minimum iOS version; the SDK only reads timestamps the server wrote.
public enum WallClock {
    /// Milliseconds since the Unix epoch.
    public static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec / 1_000_000)
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` into milliseconds since the epoch; nil otherwise.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.last == UInt8(ascii: "Z"), b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T"), b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for i in range {
                guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(b[i] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var millis: Int64 = 0
        if b.count > 20 {
            guard b[19] == UInt8(ascii: "."), b.count - 21 >= 1, b.count - 21 <= 9, let fraction = number(20..<(b.count - 1)) else { return nil }
            var scaled = fraction
            var digits = b.count - 21
            while digits > 3 { scaled /= 10; digits -= 1 }
            while digits < 3 { scaled *= 10; digits += 1 }
            millis = scaled
        } else if b.count != 20 {
            return nil
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    }
}
