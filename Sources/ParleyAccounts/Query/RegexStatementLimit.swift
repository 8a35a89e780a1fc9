import ParleyNet
import ParleyPostgres

/// Bounds `$regex` statements, whose cost PostgreSQL cannot know in advance (`^(.*)\1$` against
/// a long string backtracks for seconds): each runs in its own transaction under a short
/// `SET LOCAL statement_timeout`, and at most `maxConcurrent` run at once, so they cannot hold
/// the pool's connections; one over the cap is refused at once.
public final class RegexStatementLimit: Sendable {
    /// The `statement_timeout` of a `$regex` statement.
    public let timeout: Duration
    /// How many `$regex` statements may run at once (per node).
    public var maxConcurrent: Int { running.maxConcurrent }
    private let running: AdmissionLimit

    public init(timeout: Duration = .seconds(1), maxConcurrent: Int = 2) {
        self.timeout = timeout
        running = AdmissionLimit(maxConcurrent: maxConcurrent)
    }

    /// The rows of `compiled` (a `$regex` statement): on the pooled client in a transaction of
    /// its own with the short timeout; in a caller's transaction (a batch) with the caller's.
    func run(_ compiled: CompiledQuery, on db: any SQLExecutor) async throws(ParseError) -> PostgresRows {
        guard running.tryEnter() else { throw ParseError.regexLimitReached }
        defer { running.leave() }
        do {
            guard let client = db as? PostgresClient else { return try await db.read(compiled.sql, compiled.parameters) }
            let milliseconds = max(1, timeout.wholeMilliseconds)
            return try await client.transaction { transaction in
                try await transaction.query("SET LOCAL statement_timeout = \(milliseconds)", [], prepared: false)
                return try await transaction.query(compiled.sql, compiled.parameters)
            }
        } catch let error as PostgresError {
            if error.sqlState == "57014" { throw ParseError.regexTimedOut(timeout) }
            if let queryError = QueryError(databaseError: error) { throw ParseError(queryError) }
            throw ParseError.database(error)
        } catch let error as ParseError {
            throw error
        } catch {
            throw ParseError.internalError("\(error)")
        }
    }
}

extension ParseError {
    /// More `$regex` statements than `RegexStatementLimit.maxConcurrent` at once.
    static let regexLimitReached = ParseError.tooManyRequests("Too many $regex queries at once; try again.")

    /// A `$regex` statement ran past its `statement_timeout`.
    static func regexTimedOut(_ timeout: Duration) -> ParseError {
        .invalidQuery("$regex query took longer than \(timeout); use a simpler pattern")
    }
}
