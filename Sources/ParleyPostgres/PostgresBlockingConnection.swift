import CLibPQ

/// A plain blocking libpq connection for startup work and command-line tools (creating the
/// embedded database, migrations). Not for request paths: it blocks the calling thread.
/// Use from one thread at a time.
public final class PostgresBlockingConnection {
    private var connection: OpaquePointer?

    /// Connects; `statementTimeoutMilliseconds` nil or 0 means no timeout.
    public init(connectionString: String, statementTimeoutMilliseconds: Int? = nil) throws(PostgresError) {
        try LibPQ.checkNoNUL(connectionString, "the connection string")
        let conn = LibPQ.withConnectParameters(connectionString) { PQconnectdbParams($0, $1, 1) }
        guard let conn else { throw .connectFailed("libpq could not allocate a connection") }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = LibPQ.errorMessage(conn)
            PQfinish(conn)
            throw .connectFailed(message)
        }
        PQsetNoticeProcessor(conn, LibPQ.silentNoticeProcessor, nil)
        connection = conn
        try execute(LibPQ.sessionSetupSQL(statementTimeoutMilliseconds: statementTimeoutMilliseconds ?? 0))
    }

    deinit { close() }

    /// Closes the connection (idempotent).
    public func close() {
        if let connection { PQfinish(connection) }
        connection = nil
    }

    /// Runs SQL text that may hold several statements (simple protocol, no parameters);
    /// returns the last statement's result.
    @discardableResult
    public func execute(_ sql: String) throws(PostgresError) -> PostgresRows {
        guard let connection else { throw .shutdown }
        try LibPQ.checkNoNUL(sql, "the SQL text")
        return try finish(PQexec(connection, sql))
    }

    /// Runs one parameterised statement.
    @discardableResult
    public func query(_ sql: String, _ params: [PostgresData] = []) throws(PostgresError) -> PostgresRows {
        guard let connection else { throw .shutdown }
        try LibPQ.checkNoNUL(sql, "the SQL text")
        let parameters = try LibPQParameters(params)
        let result = parameters.withTypes { types in
            parameters.withValues { values in PQexecParams(connection, sql, parameters.count, types, values, nil, nil, 0) }
        }
        return try finish(result)
    }

    private func finish(_ result: OpaquePointer?) throws(PostgresError) -> PostgresRows {
        guard let result else {
            let message = LibPQ.errorMessage(connection)
            if PQstatus(connection) != CONNECTION_OK { throw .connectionClosed(message) }
            throw .sendFailed(message)
        }
        return try LibPQ.outcome(taking: result).get()
    }
}
