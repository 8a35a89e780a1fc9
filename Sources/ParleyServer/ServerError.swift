/// Failures of the server's own wiring (start-up, configuration).
public enum ServerError: Error, Sendable, CustomStringConvertible {
    case migrationsNotFound
    case startFailed(String)

    public var description: String {
        switch self {
        case .migrationsNotFound: "no migrations directory found: pass --migrations-dir or set PARLEY_MIGRATIONS_DIR"
        case .startFailed(let reason): "server failed to start: \(reason)"
        }
    }
}
