import ParleyJSON

/// `$text` full-text search.
extension WhereCompiler {
    // MARK: - $text

    /// The text search configurations PostgreSQL ships (`$language`; others → 102 rather than a
    /// failing statement).
    static let textLanguages: Set<String> = [
        "simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french", "german", "greek",
        "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian", "portuguese", "romanian",
        "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "yiddish",
    ]

    /// `$text: {"$search": {"$term": t, "$language": l, "$caseSensitive": false, "$diacriticSensitive": true}}`:
    /// `to_tsvector(l, f) @@ to_tsquery(l, t)` over a string field, as Parse Server's Postgres
    /// adapter (its errors for the options it cannot honour: case-sensitive and diacritic-insensitive search).
    mutating func text(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        guard case .object(let text) = operand, case .object(let search)? = text["$search"] else {
            throw .invalidQuery("bad $text: $search, should be object")
        }
        guard case .string(let term)? = search["$term"], !term.isEmpty else { throw .invalidQuery("bad $text: $term, should be string") }
        guard term.utf8.count <= QueryCompiler.maxRegexBytes else { throw .invalidQuery("$text $term is longer than \(QueryCompiler.maxRegexBytes) bytes") }
        var language = "english"
        if let value = search["$language"] {
            guard case .string(let name) = value else { throw .invalidQuery("bad $text: $language, should be string") }
            guard Self.textLanguages.contains(name.lowercased()) else { throw .invalidQuery("bad $text: $language \(name) is not a text search configuration") }
            language = name.lowercased()
        }
        if let value = search["$caseSensitive"] {
            guard case .bool(let flag) = value else { throw .invalidQuery("bad $text: $caseSensitive, should be boolean") }
            if flag { throw .invalidQuery("bad $text: $caseSensitive not supported, please use $regex or create a separate lower case column.") }
        }
        if let value = search["$diacriticSensitive"] {
            guard case .bool(let flag) = value else { throw .invalidQuery("bad $text: $diacriticSensitive, should be boolean") }
            if !flag { throw .invalidQuery("bad $text: $diacriticSensitive - false not supported, install Postgres Unaccent Extension") }
        }
        for key in search.keys where !["$term", "$language", "$caseSensitive", "$diacriticSensitive"].contains(key) {
            throw .invalidQuery("bad $text: unknown option \(key)")
        }
        let document: String
        switch target {
        case .column(let column, .string): document = column
        case .column: throw .invalidQuery("$text on \(field) needs a string field")
        case .custom(let path): document = "(" + (try expression(path)) + " #>> '{}')"
        }
        let configuration = try writer.bind(.text(language), as: "regconfig")
        let query = "to_tsquery(\(configuration), \(try writer.bind(.text(term), as: "text")))"
        let vector = "to_tsvector(\(configuration), \(document))"
        textRank = "ts_rank_cd(\(vector), \(query), 32)"
        return "\(vector) @@ \(query)"
    }
}
