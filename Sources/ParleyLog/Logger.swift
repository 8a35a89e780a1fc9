#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Severity of a log line, lowest first.
public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case trace, debug, info, notice, warning, error, critical

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        case .critical: "critical"
        }
    }

    /// Parses `trace|debug|info|notice|warning|error|critical`.
    public init?(name: String) {
        switch name.lowercased() {
        case "trace": self = .trace
        case "debug": self = .debug
        case "info": self = .info
        case "notice": self = .notice
        case "warning", "warn": self = .warning
        case "error": self = .error
        case "critical": self = .critical
        default: return nil
        }
    }
}

/// A structured logger that writes one `key=value` line per event to standard error.
///
/// Loggers are values: `with(_:_:)` returns a copy carrying extra metadata (a request id,
/// a connection id), so a request's lines can be grepped together.
public struct Logger: Sendable {
    /// The component name, printed as `label=`.
    public let label: String
    /// Metadata printed on every line of this logger.
    public private(set) var metadata: [(String, String)]

    public init(label: String) {
        self.label = label
        self.metadata = []
    }

    /// A copy of this logger with one more metadata pair.
    public func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy.metadata.append((key, value))
        return copy
    }

    public func isEnabled(_ level: LogLevel) -> Bool { level >= LogSink.level }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, _ extra: [(String, String)] = []) {
        guard isEnabled(level) else { return }
        LogSink.write(level: level, label: label, message: message(), metadata: metadata + extra)
    }

    public func trace(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.trace, message(), extra) }
    public func debug(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.debug, message(), extra) }
    public func info(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.info, message(), extra) }
    public func notice(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.notice, message(), extra) }
    public func warning(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.warning, message(), extra) }
    public func error(_ message: @autoclosure () -> String, _ extra: [(String, String)] = []) { log(.error, message(), extra) }
}
