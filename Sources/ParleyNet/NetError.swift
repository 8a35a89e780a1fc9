#if canImport(Glibc)
import Glibc
#endif

/// Errors of the socket and event-loop layer.
public enum NetError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed with `errno`.
    case system(call: String, errno: Int32)
    /// The connection or loop is closed.
    case closed
    /// A connection's queued output passed its bound (a reader that does not keep up).
    case outboundBufferFull
    /// A host or port that cannot be used.
    case invalidAddress(String)
    /// A bounded queue (the blocking pool's) is full.
    case queueFull
    /// The loop or pool is shutting down.
    case shuttingDown

    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: errno \(code)"
        case .closed: "connection closed"
        case .outboundBufferFull: "outbound buffer full"
        case .invalidAddress(let text): "invalid address: \(text)"
        case .queueFull: "queue full"
        case .shuttingDown: "shutting down"
        }
    }

    static func lastError(_ call: String) -> NetError { .system(call: call, errno: errno) }
}
