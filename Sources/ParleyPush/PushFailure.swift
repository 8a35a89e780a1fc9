import ParleyPostgres

/// Errors of the push layer.
public enum PushFailure: Error, Sendable, CustomStringConvertible {
    /// A statement failed.
    case database(PostgresError)
    /// No job with this id.
    case notFound(Int64)
    /// The job is pending or being sent: nothing to retry.
    case notRetryable(id: Int64, state: String)
    /// A pending job for the same device and conversation (or call) exists already.
    case duplicatePending(Int64)

    public var description: String {
        switch self {
        case .database(let error): "database: \(error)"
        case .notFound(let id): "no push job \(id)"
        case .notRetryable(let id, let state): "push job \(id) is \(state): nothing to retry"
        case .duplicatePending(let id): "push job \(id) has a pending twin (same device and conversation); it will carry the push"
        }
    }
}
