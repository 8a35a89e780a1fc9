/// Failures of the server's own wiring (start-up, configuration).
public enum ServerError: Error, Sendable, CustomStringConvertible {
    case startFailed(String)

    public var description: String {
        switch self {
        case .startFailed(let reason): "server failed to start: \(reason)"
        }
    }
}
