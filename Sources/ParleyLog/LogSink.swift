#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The process-wide destination of log lines: standard error, one line per event.
public enum LogSink {
    private static let minimum = Atomic<Int>(LogLevel.info.rawValue)

    /// The lowest level that is written.
    public static var level: LogLevel {
        get { LogLevel(rawValue: minimum.load(ordering: .relaxed)) ?? .info }
        set { minimum.store(newValue.rawValue, ordering: .relaxed) }
    }

    static func write(level: LogLevel, label: String, message: String, metadata: [(String, String)]) {
        var line = "ts=\(timestamp()) level=\(level) label=\(label) msg=\(quoted(message))"
        for (key, value) in metadata {
            line += " \(key)=\(quoted(value))"
        }
        line += "\n"
        CommandIO.writeAll(2, line)
    }

    /// Quotes a value when it has spaces, quotes or control characters.
    static func quoted(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.utf8.contains { $0 <= 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") }
        guard needsQuotes else { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    /// UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func timestamp() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UTCTime.iso8601(seconds: Int64(spec.tv_sec), milliseconds: Int(spec.tv_nsec / 1_000_000))
    }
}
