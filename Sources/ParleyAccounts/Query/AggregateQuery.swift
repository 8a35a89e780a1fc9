import ParleyJSON

/// A `GET /aggregate/:className` request (Parse Server's `AggregateRouter`): a `distinct` field
/// or a `pipeline` of stages, and an optional `where`.
public struct AggregateQuery: Sendable, Equatable {
    /// The class aggregated.
    public var className: String
    /// The `where` object; nil matches every row.
    public var `where`: JSONValue?
    /// `distinct`: the field whose distinct values are returned (the pipeline is then ignored, as Parse Server).
    public var distinct: String?
    /// The stages, each a one-key object (`{"$group": …}`).
    public var pipeline: [(name: String, value: JSONValue)]

    /// Most stages in one pipeline (102 beyond).
    public static let maxStages = 32
    /// Largest `pipeline` or `where` text, in bytes (107 beyond).
    public static let maxBytes = 64 * 1024

    public init(className: String, where: JSONValue? = nil, distinct: String? = nil, pipeline: [(name: String, value: JSONValue)] = []) {
        self.className = className
        self.where = `where`
        self.distinct = distinct
        self.pipeline = pipeline
    }

    public static func == (lhs: AggregateQuery, rhs: AggregateQuery) -> Bool {
        lhs.className == rhs.className && lhs.where == rhs.where && lhs.distinct == rhs.distinct
            && lhs.pipeline.map(\.name) == rhs.pipeline.map(\.name) && lhs.pipeline.map(\.value) == rhs.pipeline.map(\.value)
    }

    /// The query of a request's parameters: from the query string (`values` are text, JSON for
    /// `where` and `pipeline`) or from a JSON body. `pipeline` is an array of stages or an object
    /// of stages; a top-level `$stage` parameter is a stage too. `hint`, `comment`,
    /// `readPreference` and `_`-prefixed names are ignored; `explain` and anything else → 102.
    public static func fromParameters(className: String, _ parameters: [(name: String, value: JSONValue)]) throws(QueryError) -> AggregateQuery {
        var query = AggregateQuery(className: className)
        var seen = Set<String>()
        var stages: [JSONValue] = []
        for (name, value) in parameters {
            if name.hasPrefix("_") || name == "hint" || name == "comment" || name == "readPreference" { continue }
            guard seen.insert(name).inserted else { throw .invalidQuery("Invalid parameter for query: \(name)") }
            switch name {
            case "where":
                switch value {
                case .string(let text): query.where = try ParseQuery.parseWhere(text)
                case .object: query.where = value
                case .null: query.where = nil
                default: throw .invalidQuery("where must be a JSON object")
                }
            case "distinct":
                guard case .string(let field) = value, FieldPath.isValidPath(field) else { throw .invalidQuery("distinct expects a field name") }
                query.distinct = field
            case "pipeline":
                var pipeline = value
                if case .string(let text) = value {
                    do {
                        pipeline = try JSONParser(maxDepth: ParseQuery.maxWhereDepth, maxBytes: maxBytes).parse(text)
                    } catch {
                        throw .invalidJSON("pipeline is not valid JSON: \(error.description)")
                    }
                }
                switch pipeline {
                case .array(let items): stages.append(contentsOf: items)
                case .object(let object): for (key, stage) in object { stages.append(.object([key: stage])) }
                default: throw .invalidQuery("pipeline must be an array or an object of stages")
                }
            case "explain":
                throw .invalidQuery("explain is not supported")
            default:
                guard name.hasPrefix("$") else { throw .invalidQuery("Invalid aggregate stage '\(name)'.") }
                var stage = value
                if case .string(let text) = value, let parsed = try? JSONParser(maxDepth: ParseQuery.maxWhereDepth, maxBytes: maxBytes).parse(text) {
                    stage = parsed
                }
                stages.append(.object([name: stage]))
            }
        }
        guard stages.count <= maxStages else { throw .invalidQuery("the pipeline has more than \(maxStages) stages") }
        for stage in stages {
            guard case .object(let object) = stage, object.count == 1, let (name, value) = object.first else {
                let keys = stage.object.map { $0.keys.sorted().joined(separator: ", ") } ?? ""
                throw .invalidQuery("Pipeline stages should only have one key but found \(keys).")
            }
            if name == "distinct" || name == "where" { continue }
            guard name.hasPrefix("$") else { throw .invalidQuery("Invalid aggregate stage '\(name)'.") }
            if name == "$group" {
                guard case .object(let group) = value else { throw .invalidQuery("$group expects an object") }
                if group["objectId"] != nil { throw .invalidQuery("Cannot use 'objectId' in aggregation stage $group.") }
                if group["_id"] == nil { throw .invalidQuery("Invalid parameter for query: group. Missing key _id") }
            }
            query.pipeline.append((name, value))
        }
        return query
    }
}
