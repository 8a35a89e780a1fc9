import ParleyPostgres

/// Why a Parse query was refused, with the Parse error code it maps to on the wire.
public enum QueryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Parse 102 (INVALID_QUERY): an unknown or unsupported operator, key or parameter, or an
    /// operand of the wrong type. The message names the offending key.
    case invalidQuery(String)
    /// Parse 107 (INVALID_JSON): `where` is not valid JSON.
    case invalidJSON(String)
    /// Parse 119 (OPERATION_FORBIDDEN): the field may only be queried with the master key.
    case operationForbidden(String)

    /// The Parse error code.
    public var code: Int {
        switch self {
        case .invalidQuery: 102
        case .invalidJSON: 107
        case .operationForbidden: 119
        }
    }

    /// The human-readable message for the `error` member of the response.
    public var message: String {
        switch self {
        case .invalidQuery(let message), .invalidJSON(let message), .operationForbidden(let message): message
        }
    }

    public var description: String { "Parse error \(code): \(message)" }

    /// The query error a database error stands for, or nil when it is not the query's fault.
    ///
    /// PostgreSQL validates `$regex` patterns only when it runs the statement; an invalid pattern
    /// (SQLSTATE 2201B) becomes 102.
    public init?(databaseError: PostgresError) {
        switch databaseError.sqlState {
        case "2201B":
            if case .server(let error) = databaseError {
                self = .invalidQuery("invalid $regex: \(error.message)")
            } else {
                self = .invalidQuery("invalid $regex")
            }
        case "42601":
            // `to_tsquery` refuses a `$text` `$term` that is not a valid tsquery.
            guard case .server(let error) = databaseError, error.message.contains("tsquery") else { return nil }
            self = .invalidQuery("invalid $text $term: \(error.message)")
        default:
            return nil
        }
    }
}
