import ParleyPostgres

/// Something that runs statements: the pooled client, or one transaction (for `POST /batch`
/// with `"transaction": true`). Stores take one per call so the same code runs in both.
public protocol SQLExecutor: Sendable {
    func query(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows
    /// A statement without side effects: the pooled client may batch it with other reads.
    func read(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows
}

extension PostgresClient: SQLExecutor {
    public func query(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows {
        try await query(sql, params, prepared: true)
    }
}

extension PostgresTransaction: SQLExecutor {
    public func query(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows {
        try await query(sql, params, prepared: true)
    }
}

extension SQLExecutor {
    /// By default a read is an ordinary statement (in a transaction, say).
    public func read(_ sql: String, _ params: [PostgresData]) async throws(PostgresError) -> PostgresRows {
        try await query(sql, params)
    }

    /// Runs a statement, turning database failures into `ParseError.internalError` (logged by the
    /// caller), except the ones a caller maps itself (`mapping` returns nil to keep the default).
    /// A `readOnly` statement goes through `read`, so the pooled client may batch it.
    @discardableResult
    func run(_ sql: String, _ params: [PostgresData], readOnly: Bool = false,
             mapping: (PostgresError) -> ParseError? = { _ in nil }) async throws(ParseError) -> PostgresRows {
        do {
            return readOnly ? try await read(sql, params) : try await query(sql, params)
        } catch {
            if let mapped = mapping(error) { throw mapped }
            throw ParseError.database(error)
        }
    }
}

extension ParseError {
    /// A database failure as a Parse error: text holding U+0000 → 107 (whichever value or path
    /// carried it); bad input the server caught (invalid text representation, numeric overflow)
    /// → 111; everything else → internal (1).
    static func database(_ error: PostgresError) -> ParseError {
        if error.isNULInText { return .nulCharacter }
        switch error.sqlState {
        case "22P02", "22003", "22023", "2202E":
            return .incorrectType("value has the wrong type or is out of range for this field")
        case "54000", "54001":
            return .objectTooLarge("object too large")
        case "57014":
            return .internalError("statement timeout: \(error)")
        default:
            return .internalError("\(error)")
        }
    }
}
