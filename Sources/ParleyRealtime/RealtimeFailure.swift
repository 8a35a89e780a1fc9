import ParleyPostgres

/// Why a realtime operation failed, as it goes on the wire (`error` frame or REST error body).
public struct RealtimeFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: RealtimeErrorCode
    public var message: String
    /// Recipients that do not exist (for `user_not_found`).
    public var failedRecipients: [String]

    public init(_ code: RealtimeErrorCode, _ message: String, failedRecipients: [String] = []) {
        self.code = code
        self.message = message
        self.failedRecipients = failedRecipients
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The wire failure for a database error: bad_request for text holding U+0000, unavailable
    /// when the database cannot be reached or is overloaded (the client retries), internal otherwise.
    static func database(_ error: PostgresError) -> RealtimeFailure {
        if error.isNULInText { return RealtimeFailure(.badRequest, "text must not contain NUL") }
        switch error {
        case .connectionClosed, .connectFailed, .connectionUnavailable, .tooManyWaiters, .shutdown, .sendFailed:
            return RealtimeFailure(.unavailable, "the database is unavailable; retry later")
        case .server(let server) where server.sqlState == "57014" || server.sqlState.hasPrefix("08")
            || server.sqlState.hasPrefix("53") || server.sqlState.hasPrefix("57"):
            return RealtimeFailure(.unavailable, "the database is overloaded or restarting; retry later")
        case .server(let server) where server.sqlState == "PR001":
            return RealtimeFailure(.tooManyDevices, "this user has too many devices")
        default:
            return RealtimeFailure(.internal, "internal error")
        }
    }
}
