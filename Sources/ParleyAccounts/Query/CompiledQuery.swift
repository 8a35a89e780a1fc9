import ParleyPostgres

/// One parameterised SQL statement produced by `QueryCompiler`: every client-supplied value is
/// in `parameters` (`$1` is `parameters[0]`), never in `sql`.
public struct CompiledQuery: Sendable, Equatable, CustomStringConvertible {
    public var sql: String
    public var parameters: [PostgresData]
    /// The statement matches a `$regex`: it runs under `RegexStatementLimit`.
    public var usesRegex: Bool

    public init(sql: String, parameters: [PostgresData], usesRegex: Bool = false) {
        self.sql = sql
        self.parameters = parameters
        self.usesRegex = usesRegex
    }

    public var description: String {
        "\(sql) -- \(parameters.map { $0.textValue ?? "NULL" })"
    }
}
