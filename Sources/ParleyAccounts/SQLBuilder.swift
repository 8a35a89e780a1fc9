import ParleyPostgres

/// Accumulates statement parameters and hands out their `$n` placeholders, so user values are
/// always parameters and never spliced into SQL text.
struct SQLBuilder {
    private(set) var params: [PostgresData] = []

    init(params: [PostgresData] = []) {
        self.params = params
    }

    /// Appends a parameter and returns its placeholder (`$3`).
    mutating func bind(_ value: PostgresData) -> String {
        params.append(value)
        return "$\(params.count)"
    }

    /// A text parameter cast to `text` (for jsonb keys: `data->$1::text`).
    mutating func key(_ name: String) -> String {
        "\(bind(.text(name)))::text"
    }
}
