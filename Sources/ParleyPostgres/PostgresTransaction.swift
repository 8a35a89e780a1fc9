import ParleyNet

/// The connection a transaction runs on, handed to `transaction { tx in … }`.
///
/// Thread confinement: used on the pool's loop (checked; `PostgresClient` runs the body with the
/// loop as task executor). `@unchecked Sendable` so the body may be any async closure.
public final class PostgresTransaction: @unchecked Sendable {
    private let connection: PostgresConnection
    /// The connection's session when BEGIN was sent; a reconnect means the transaction is gone.
    let session: UInt64
    private(set) var hasEnded = false

    init(connection: PostgresConnection) {
        self.connection = connection
        self.session = connection.session
    }

    /// Runs one statement inside the transaction.
    @discardableResult
    public func query(_ sql: String, _ params: [PostgresData] = [], prepared: Bool = true) async throws(PostgresError) -> PostgresRows {
        connection.loop.preconditionInEventLoop()
        guard !hasEnded else { throw .unsupported("the transaction has already ended") }
        guard connection.session == session, connection.state == .ready else {
            throw .connectionClosed("the connection was lost during the transaction; it was rolled back")
        }
        return try await connection.query(sql, params, prepared: prepared)
    }

    func end() { hasEnded = true }
}
