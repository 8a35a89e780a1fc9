import ParleyJSON
import ParleyPostgres

/// Collects the parameters of one statement and hands out their `$n::type` references.
struct SQLWriter {
    private(set) var parameters: [PostgresData] = []
    private var keyReferences: [String: String] = [:]

    /// Appends a parameter and returns `$n::cast`.
    mutating func bind(_ value: PostgresData, as cast: String) throws(QueryError) -> String {
        switch value {
        case .text(let text), .json(let text):
            guard !text.utf8.contains(0) else { throw .invalidQuery("query values cannot contain U+0000") }
        case .textArray(let items):
            guard !items.contains(where: { $0.utf8.contains(0) }) else { throw .invalidQuery("query values cannot contain U+0000") }
        default:
            break
        }
        parameters.append(value)
        return "$" + String(parameters.count) + "::" + cast
    }

    /// Gives parameter `$number` another value of the same type, for a statement that uses the
    /// parameter differently from the predicate it was bound for.
    mutating func rebind(_ number: Int, to value: PostgresData) {
        precondition(number >= 1 && number <= parameters.count, "no parameter $\(number)")
        parameters[number - 1] = value
    }

    /// `$n::jsonb` holding `value` serialized.
    mutating func bindJSON(_ value: JSONValue) throws(QueryError) -> String {
        try bind(.json(value.serialized()), as: "jsonb")
    }

    /// A jsonb key or path parameter, bound once per statement however often it is used.
    mutating func bindKey(_ path: [String]) throws(QueryError) -> String {
        let cacheKey = path.joined(separator: ".")
        if let reference = keyReferences[cacheKey] { return reference }
        let reference = path.count == 1 ? try bind(.text(path[0]), as: "text") : try bind(.textArray(path), as: "text[]")
        keyReferences[cacheKey] = reference
        return reference
    }
}
