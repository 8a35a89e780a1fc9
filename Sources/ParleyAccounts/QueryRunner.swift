import ParleyJSON
import ParleyPostgres

/// Runs Parse queries (`GET /classes/:name`, `GET /users`, `GET /installations`) through the
/// query compiler and turns the rows into Parse JSON for the caller.
public struct QueryRunner: Sendable {
    public init() {}

    /// The rows of `query` readable by `auth`, and the count when `query.count` is set.
    public func find(_ query: ParseQuery, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> (results: [JSONObject], count: Int?) {
        let layout = TableLayout.forClass(query.className)
        if layout.table == "objects" { try ObjectStore.validate(className: query.className) }
        let readers: [String]? = auth.isMaster ? nil : (auth.userId.map { [$0] } ?? [])
        var results: [JSONObject] = []
        if query.limit > 0 {
            let compiled = try Self.compile { () throws(QueryError) in try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readers) }
            let rows = try await Self.run(compiled, on: db)
            results.reserveCapacity(rows.count)
            for row in rows {
                let json: JSONObject
                switch query.className {
                case ClassName.user: json = UserStore.json(row, viewer: auth)
                case ClassName.installation: json = InstallationStore.json(row)
                case ClassName.session: json = SessionStore.json(row)
                default: json = ObjectStore.json(row)
                }
                results.append(RowJSON.select(json, keys: query.keys))
            }
        }
        var count: Int?
        if query.count {
            let compiled = try Self.compile { () throws(QueryError) in try QueryCompiler.compileCount(query, layout: layout, readerIDs: readers) }
            count = try await Self.run(compiled, on: db).first?["count"].int ?? 0
        }
        return (results, count)
    }

    private static func compile(_ body: () throws(QueryError) -> CompiledQuery) throws(ParseError) -> CompiledQuery {
        do {
            return try body()
        } catch {
            throw ParseError(error)
        }
    }

    private static func run(_ compiled: CompiledQuery, on db: any SQLExecutor) async throws(ParseError) -> PostgresRows {
        do {
            return try await db.query(compiled.sql, compiled.parameters)
        } catch {
            if let queryError = QueryError(databaseError: error) { throw ParseError(queryError) }
            throw ParseError.database(error)
        }
    }
}

extension ParseError {
    /// The Parse error for a refused query.
    public init(_ error: QueryError) {
        switch error {
        case .invalidQuery(let message): self = .invalidQuery(message)
        case .invalidJSON(let message): self = .invalidJSON(message)
        case .operationForbidden(let message): self = .operationForbidden(message)
        }
    }
}
