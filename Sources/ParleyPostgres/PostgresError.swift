/// Fields of an error reported by the PostgreSQL server.
public struct PostgresServerError: Sendable, Equatable, CustomStringConvertible {
    /// `ERROR`, `FATAL` or `PANIC`.
    public var severity: String
    /// Five-character SQLSTATE code, e.g. `23505` for a unique violation.
    public var sqlState: String
    public var message: String
    public var detail: String?
    public var hint: String?
    public var table: String?
    public var column: String?
    public var constraint: String?

    public init(severity: String, sqlState: String, message: String, detail: String? = nil, hint: String? = nil,
                table: String? = nil, column: String? = nil, constraint: String? = nil) {
        self.severity = severity
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.table = table
        self.column = column
        self.constraint = constraint
    }

    public var description: String {
        var text = "\(severity) \(sqlState): \(message)"
        if let detail { text += " (detail: \(detail))" }
        if let hint { text += " (hint: \(hint))" }
        return text
    }
}

/// Errors of the PostgreSQL client.
public enum PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server rejected the statement.
    case server(PostgresServerError)
    /// The connection was lost while the statement was in flight: it may or may not have run.
    case connectionClosed(String)
    /// A connection could not be established.
    case connectFailed(String)
    /// No connection became usable within the pool's wait timeout (PostgreSQL down or restarting).
    case connectionUnavailable(String)
    /// The pool's wait queue is full.
    case tooManyWaiters(limit: Int)
    /// The pool, connection or listener was shut down.
    case shutdown
    /// libpq refused to queue the statement.
    case sendFailed(String)
    /// The statement or a parameter is not supported (COPY, more than 65535 parameters).
    case unsupported(String)
    /// The statement text or a parameter (`what`) holds a NUL byte, which PostgreSQL's text cannot
    /// store (libpq would cut it short); refused before anything is sent.
    case nulInText(String)

    public var description: String {
        switch self {
        case .server(let error): "PostgreSQL error: \(error)"
        case .connectionClosed(let reason): "connection to PostgreSQL lost (the statement may or may not have run): \(reason)"
        case .connectFailed(let reason): "could not connect to PostgreSQL: \(reason)"
        case .connectionUnavailable(let reason): "no PostgreSQL connection available: \(reason)"
        case .tooManyWaiters(let limit): "too many queries waiting for a PostgreSQL connection (limit \(limit))"
        case .shutdown: "the PostgreSQL client is shut down"
        case .sendFailed(let reason): "could not send the statement to PostgreSQL: \(reason)"
        case .unsupported(let reason): "unsupported PostgreSQL usage: \(reason)"
        case .nulInText(let what): "\(what) contains a NUL byte, which PostgreSQL cannot store"
        }
    }

    /// The SQLSTATE of a server error, nil otherwise.
    public var sqlState: String? {
        if case .server(let error) = self { return error.sqlState }
        return nil
    }

    /// The statement was cancelled by `statement_timeout` (SQLSTATE 57014).
    public var isStatementTimeout: Bool { sqlState == "57014" }

    /// The statement failed because text held U+0000, which PostgreSQL cannot store: a NUL byte
    /// in the statement or a parameter (refused before sending), or `\u0000` in jsonb input
    /// (SQLSTATE 22P05). Callers map it to their "bad input" error, never to an internal one.
    public var isNULInText: Bool {
        if case .nulInText = self { return true }
        return sqlState == "22P05"
    }

    /// A unique constraint was violated (SQLSTATE 23505).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// The constraint a server error names, nil otherwise.
    public var constraint: String? {
        if case .server(let error) = self { return error.constraint }
        return nil
    }

    /// A serialization failure or deadlock: the transaction can be retried.
    public var isRetryableTransactionFailure: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// SQLSTATEs sent when the server goes away (admin shutdown, crash shutdown, cannot connect now).
    static func isConnectionTermination(_ sqlState: String) -> Bool {
        sqlState == "57P01" || sqlState == "57P02" || sqlState == "57P03"
    }
}
