import ParleyPostgres

/// One parameterised SQL statement produced by `QueryCompiler`: every client-supplied value is
/// in `parameters` (`$1` is `parameters[0]`), never in `sql`.
public struct CompiledQuery: Sendable, Equatable, CustomStringConvertible {
    public var sql: String
    public var parameters: [PostgresData]

    public init(sql: String, parameters: [PostgresData]) {
        self.sql = sql
        self.parameters = parameters
    }

    public var description: String {
        "\(sql) -- \(parameters.map { $0.textValue ?? "NULL" })"
    }
}
