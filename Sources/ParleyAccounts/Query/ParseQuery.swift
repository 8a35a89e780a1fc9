import ParleyJSON

/// A Parse REST query (`GET /classes/:name`, `GET /users`): the constraints and paging options
/// of the request, validated but not yet compiled (see `QueryCompiler`).
public struct ParseQuery: Sendable, Equatable {
    /// One sort key of `order`: a field, ascending unless written with a leading `-`.
    public struct OrderKey: Sendable, Equatable {
        public var field: String
        public var descending: Bool

        public init(field: String, descending: Bool = false) {
            self.field = field
            self.descending = descending
        }
    }

    /// Rows returned when the request gives no `limit`.
    public static let defaultLimit = 100
    /// Largest `limit`; a larger one is lowered to it (Parse Server's `maxLimit` behaviour).
    public static let maxLimit = 1000
    /// Largest `skip` (102 beyond): deep offsets cost a scan of every skipped row.
    public static let maxSkip = 100_000
    /// Largest `where` document, in bytes of JSON (107 beyond).
    public static let maxWhereBytes = 64 * 1024
    /// Deepest nesting of the `where` JSON (107 beyond).
    public static let maxWhereDepth = 32

    /// The Parse class queried (`_User` for `/users`).
    public var className: String
    /// The `where` object; nil matches every row.
    public var `where`: JSONValue?
    public var order: [OrderKey]
    /// 0 returns no rows (use with `count`).
    public var limit: Int
    public var skip: Int
    /// Fields to return besides `objectId`, `createdAt`, `updatedAt`; nil returns every field.
    public var keys: [String]?
    /// Whether the response carries `count` (the number of matching rows, ignoring limit and skip).
    public var count: Bool
    /// Included pointers, dotted `keys` and `excludeKeys` (`keys` above holds their top-level fields).
    public var shape: ReadShape = ReadShape()
    /// Top-level `where` fields the class's schema records as Relations (set by `QueryRunner`
    /// from the schema, never from the request): a Pointer constraint on one means "owners whose
    /// relation holds it".
    public var relationFields: Set<String> = []
    /// What the viewer may read of each class a subquery in `where` reads (set by `QueryRunner`
    /// from the class-level permissions, never from the request; the master key needs none).
    public var subqueryScopes: [String: SubqueryScope] = [:]
    /// `keys` held `$score`: each row carries its `$text` rank as `score` (Parse Server's
    /// `ts_rank_cd … AS score`); `keys` then lists `score`.
    public var selectsTextScore = false

    /// Moves a `$score` entry of `keys` to `selectsTextScore`.
    mutating func takeScoreKey() {
        if Self.takeScoreKey(&keys) { selectsTextScore = true }
    }

    /// Renames `$score` in `keys` to `score`; whether it was there.
    static func takeScoreKey(_ keys: inout [String]?) -> Bool {
        guard let index = keys?.firstIndex(of: "$score") else { return false }
        keys?[index] = "score"
        return true
    }

    public init(className: String, where: JSONValue? = nil, order: [OrderKey] = [], limit: Int = ParseQuery.defaultLimit,
                skip: Int = 0, keys: [String]? = nil, count: Bool = false) {
        self.className = className
        self.where = `where`
        self.order = order
        self.limit = limit
        self.skip = skip
        self.keys = keys
        self.count = count
        shape = ReadShape(keys: keys)
    }

    /// Whether a row's `field` belongs in the response given `keys`.
    public func returns(_ field: String) -> Bool {
        guard let keys else { return true }
        return field == "objectId" || field == "createdAt" || field == "updatedAt" || keys.contains(field)
    }

    /// Parses the query-string parameters of a GET (already percent-decoded): `where` (JSON),
    /// `order`, `limit`, `skip`, `keys`, `count`.
    ///
    /// Parameters whose name starts with `_` (Parse's request envelope) and the read-preference
    /// hints are ignored; `include`, `excludeKeys`, `explain` and the like are refused (102),
    /// as is any other name.
    public static func fromRequest(className: String, parameters: [(name: String, value: String)]) throws(QueryError) -> ParseQuery {
        // Parts first, the query once at the end: assigning to a query's fields one by one
        // between throwing calls copied the whole query twice per find.
        var whereValue: JSONValue?
        var order: [OrderKey] = []
        var limit = defaultLimit
        var skip = 0
        var keys: [String]?
        var count = false
        var shape: ReadShape?
        var seen = SeenParameters()
        for (name, value) in parameters {
            guard try seen.accept(name) else { continue }
            switch name {
            case "where": whereValue = try parseWhere(value)
            case "order": order = try parseOrder(value)
            case "limit": limit = try parseLimit(value)
            case "skip": skip = try parseSkip(value)
            case "keys":
                var parsed = shape ?? ReadShape()
                try parsed.setKeys([value])
                keys = parsed.topLevelKeys
                shape = parsed
            case "count": count = try parseCount(value)
            default:
                var parsed = shape ?? ReadShape()
                try readShapeParameter(name, .string(value), into: &parsed)
                shape = parsed
            }
        }
        // Everything that can throw before the query exists: a throw after it copied it.
        var finished: ReadShape?
        if var shape {
            try shape.finish()
            finished = shape
        }
        let selectsTextScore = takeScoreKey(&keys)
        var query = ParseQuery(className: className, where: whereValue, order: order, limit: limit, skip: skip, keys: keys, count: count)
        if let finished { query.shape = finished }
        query.selectsTextScore = selectsTextScore
        return query
    }

    /// Parses the JSON body of the POST form of a query (`{"_method":"GET","where":{…},"limit":10}`):
    /// the same parameters as `fromRequest`, as JSON values (`where` an object or its JSON text,
    /// numbers as numbers or strings, `count` as 1, true or a string).
    public static func fromJSON(className: String, body: JSONObject) throws(QueryError) -> ParseQuery {
        var query = ParseQuery(className: className)
        var seen = SeenParameters()
        for (name, value) in body {
            guard try seen.accept(name) else { continue }
            switch name {
            case "where":
                switch value {
                case .string(let text): query.where = try parseWhere(text)
                case .object: query.where = value
                case .null: query.where = nil
                default: throw .invalidQuery("where must be a JSON object")
                }
            case "order": query.order = try parseOrder(try text(value, name))
            case "limit": query.limit = try parseLimit(try text(value, name))
            case "skip": query.skip = try parseSkip(try text(value, name))
            case "keys":
                try query.shape.setKeys(try list(value, name))
                query.keys = query.shape.topLevelKeys
            case "count":
                switch value {
                case .bool(let flag): query.count = flag
                default: query.count = try parseCount(try text(value, name))
                }
            default:
                try readShapeParameter(name, value, into: &query.shape)
            }
        }
        try query.shape.finish()
        query.takeScoreKey()
        return query
    }

    /// The shape of a single-object GET (`GET /classes/:className/:objectId`, the system classes'
    /// equivalents and `/users/me`), from its parameters (query-string values as strings, or the
    /// JSON body of the `_method: GET` form): `keys`, `include`, `excludeKeys` (and the
    /// read-preference hints), as Parse Server allows there; any other is refused (102). They
    /// mean what they mean in a query, so a fetch and a find answer one way.
    public static func fetchShape(parameters: [(name: String, value: JSONValue)]) throws(QueryError) -> ReadShape {
        var shape = ReadShape()
        var seen = SeenParameters()
        for (name, value) in parameters {
            guard try seen.accept(name) else { continue }
            switch name {
            case "keys":
                let entries = try list(value, name)
                if !entries.allSatisfy({ $0.isEmpty }) { try shape.setKeys(entries) }
            case "include", "excludeKeys":
                try readShapeParameter(name, value, into: &shape)
            default:
                throw .invalidQuery("Improper encode of parameter")
            }
        }
        try shape.finish()
        return shape
    }

    // MARK: - Parameters

    private static let ignoredParameters: Set<String> = ["readPreference", "includeReadPreference", "subqueryReadPreference", "hint", "comment"]
    private static let unsupportedParameters: Set<String> = ["explain", "redirectClassNameForKey"]

    /// `include`, `includeAll` and `excludeKeys`; anything else is refused as `refuseUnsupported` words it.
    private static func readShapeParameter(_ name: String, _ value: JSONValue, into shape: inout ReadShape) throws(QueryError) {
        switch name {
        case "include": try shape.addInclude(try list(value, name))
        case "excludeKeys": try shape.setExcludeKeys(try list(value, name))
        case "includeAll":
            switch value {
            case .bool(false), .null: break
            case .string(let text) where text == "false" || text == "0": break
            default: shape.setIncludeAll()
            }
        default: try refuseUnsupported(name, empty: isEmpty(value))
        }
    }

    /// A list parameter: comma-separated text, or a JSON array of such texts (every SDK form).
    private static func list(_ value: JSONValue, _ name: String) throws(QueryError) -> [String] {
        if case .array(let items) = value {
            guard items.count <= ReadShape.maxListEntries else { throw .invalidQuery("\(name) has more than \(ReadShape.maxListEntries) entries") }
            return try items.map { item throws(QueryError) in try text(item, name) }
        }
        return [try text(value, name)]
    }

    /// The parameters read so far, to refuse repeats: the query's own six as bits (every find
    /// has some, and this runs for each), any other name in a list.
    private struct SeenParameters {
        private var known: UInt8 = 0
        private var others: [String] = []

        /// Whether `name` is a parameter to read (false: ignore it); refuses repeats.
        mutating func accept(_ name: String) throws(QueryError) -> Bool {
            let bit: UInt8
            switch name {
            case "where": bit = 1
            case "order": bit = 2
            case "limit": bit = 4
            case "skip": bit = 8
            case "keys": bit = 16
            case "count": bit = 32
            default:
                if name.utf8.first == 0x5F || ParseQuery.ignoredParameters.contains(name) { return false }
                guard !others.contains(name) else { throw .invalidQuery("parameter \(name) is given twice") }
                others.append(name)
                return true
            }
            guard known & bit == 0 else { throw .invalidQuery("parameter \(name) is given twice") }
            known |= bit
            return true
        }
    }

    private static func refuseUnsupported(_ name: String, empty: Bool) throws(QueryError) {
        if unsupportedParameters.contains(name) {
            if empty { return }
            throw .invalidQuery("\(name) is not supported")
        }
        throw .invalidQuery("Invalid parameter for query: \(name)")
    }

    /// A parameter given without a value (null or an empty string).
    private static func isEmpty(_ value: JSONValue) -> Bool {
        switch value {
        case .null: true
        case .string(let text): text.isEmpty
        default: false
        }
    }

    private static func text(_ value: JSONValue, _ name: String) throws(QueryError) -> String {
        switch value {
        case .string(let text): return text
        case .int(let number): return String(number)
        case .double(let number):
            guard let integer = Int64(exactly: number) else { throw .invalidQuery("\(name) must be an integer") }
            return String(integer)
        case .null: return ""
        default: throw .invalidQuery("\(name) must be a string")
        }
    }

    static func parseWhere(_ text: String) throws(QueryError) -> JSONValue? {
        if text.isEmpty { return nil }
        let value: JSONValue
        do {
            value = try JSONParser(maxDepth: maxWhereDepth, maxBytes: maxWhereBytes).parse(text)
        } catch {
            throw .invalidJSON("where is not valid JSON: \(error.description)")
        }
        guard case .object = value else { throw .invalidQuery("where must be a JSON object") }
        return value
    }

    static func parseOrder(_ text: String) throws(QueryError) -> [OrderKey] {
        var keys: [OrderKey] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            var name = part.trimmingSpaces()
            if name.isEmpty {
                if text.isEmpty { break }
                throw .invalidQuery("order has an empty key")
            }
            if name == "$score" || name == "-$score" {
                // Parse Server sorts by text score descending either way (`{$meta: "textScore"}`).
                keys.append(OrderKey(field: "$score", descending: true))
                continue
            }
            var descending = false
            if name.hasPrefix("-") {
                descending = true
                name.removeFirst()
            }
            guard FieldPath.isValidPath(name) else { throw .invalidQuery("invalid order key: \(String(part))") }
            keys.append(OrderKey(field: name, descending: descending))
        }
        return keys
    }

    static func parseLimit(_ text: String) throws(QueryError) -> Int {
        if text.isEmpty { return defaultLimit }
        guard let value = parseNonNegative(text) else { throw .invalidQuery("limit must be a non-negative integer") }
        return min(value, maxLimit)
    }

    static func parseSkip(_ text: String) throws(QueryError) -> Int {
        if text.isEmpty { return 0 }
        guard let value = parseNonNegative(text) else { throw .invalidQuery("skip must be a non-negative integer") }
        guard value <= maxSkip else { throw .invalidQuery("skip must be at most \(maxSkip)") }
        return value
    }

    /// Decimal digits as a count, saturating at `Int.max`; nil for anything else.
    private static func parseNonNegative(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text) ?? Int.max
    }

    static func parseCount(_ text: String) throws(QueryError) -> Bool {
        switch text {
        case "1", "true": return true
        case "", "0", "false": return false
        default: throw .invalidQuery("count must be 1 or 0")
        }
    }
}

extension Substring {
    /// The text without leading and trailing spaces.
    fileprivate func trimmingSpaces() -> String {
        var slice = self
        while slice.first == " " { slice.removeFirst() }
        while slice.last == " " { slice.removeLast() }
        return String(slice)
    }
}
