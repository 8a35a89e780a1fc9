import ParleyJSON
import ParleyPostgres

/// Compiles an `AggregateQuery` into one parameterised SELECT whose rows have one jsonb column,
/// `doc`: each result object. Each stage reads the documents of the stage before as a derived
/// table (`SELECT … FROM (…) AS sN`); the first reads the class's rows (custom fields, `objectId`,
/// `createdAt`, `updatedAt` and the typed columns as a read returns them) filtered by `where` and
/// the leading `$match` stages, with the full query compiler. The master key only: no ACL filter.
public enum AggregateCompiler {
    /// Most result rows (102 beyond: add a `$limit`).
    public static let maxRows = 10_000
    /// Most accumulators of one `$group`, and keys of one `$project` or `$sort`.
    public static let maxFields = 32
    /// The stages compiled; any other is refused with 102 naming it.
    public static let stages: Set<String> = ["$match", "$group", "$project", "$sort", "$limit", "$skip", "$count"]

    /// The `EXTRACT` field of each date operator in a `$group` key (Parse Server's `mongoAggregateToPostgres`).
    static let dateParts: [String: String] = [
        "$dayOfMonth": "DAY", "$dayOfWeek": "DOW", "$dayOfYear": "DOY", "$isoDayOfWeek": "ISODOW", "$isoWeekYear": "ISOYEAR",
        "$hour": "HOUR", "$minute": "MINUTE", "$second": "SECOND", "$millisecond": "MILLISECONDS", "$month": "MONTH",
        "$week": "WEEK", "$year": "YEAR",
    ]

    /// One SELECT level of the statement.
    private struct Level {
        var select: String
        var from: String
        var predicates: [String] = []
        var groupBy: String?
        var orderBy: String?
        var limit: Int?
        var offset: Int?

        /// Whether `doc` names the documents this level reads and returns unchanged.
        var passesDocuments: Bool { select == "doc" && groupBy == nil }

        var sql: String {
            var sql = "SELECT " + select + " AS doc FROM " + from
            if !predicates.isEmpty { sql += " WHERE " + predicates.joined(separator: " AND ") }
            if let groupBy { sql += " GROUP BY " + groupBy }
            if let orderBy { sql += " ORDER BY " + orderBy }
            if let limit { sql += " LIMIT " + String(limit) }
            if let offset { sql += " OFFSET " + String(offset) }
            return sql
        }
    }

    /// The statement for `query` (its rows: `doc`, at most `maxRows + 1` of them).
    public static func compile(_ query: AggregateQuery) throws(QueryError) -> CompiledQuery {
        let layout = TableLayout.forClass(query.className)
        var compiler = WhereCompiler(layout: layout, readerIDs: nil)
        var base = try baseLevel(layout: layout, where: query.where, compiler: &compiler)
        var stages = query.pipeline[...]
        while let stage = stages.first, stage.name == "$match" {
            guard case .object(let match) = stage.value else { throw .invalidQuery("$match expects a where object") }
            base.predicates.append(contentsOf: try compiler.compile(match))
            stages = stages.dropFirst()
        }
        var level = base
        var number = 0
        func wrap(_ level: Level) -> Level {
            number += 1
            return Level(select: "doc", from: "(" + level.sql + ") AS s" + String(number))
        }
        if let field = query.distinct {
            let value = try documentValue("$" + field, compiler: &compiler)
            let values = "jsonb_array_elements(CASE WHEN jsonb_typeof(\(value)) = 'array' THEN \(value) ELSE jsonb_build_array(\(value)) END) AS e(v)"
            let sql = "SELECT DISTINCT e.v AS doc FROM (" + level.sql + ") AS s0, " + values
                + " WHERE e.v IS NOT NULL AND e.v <> 'null' ORDER BY doc LIMIT " + String(maxRows + 1)
            return CompiledQuery(sql: sql, parameters: compiler.writer.parameters, usesRegex: compiler.usesRegex)
        }
        level = wrap(level)
        for (name, value) in stages {
            switch name {
            case "$match":
                throw .invalidQuery("$match is supported only before the other stages")
            case "$group":
                level = try group(value, from: level, number: &number, compiler: &compiler)
            case "$project":
                if !level.passesDocuments { level = wrap(level) }
                level.select = try project(value, compiler: &compiler)
            case "$sort":
                if !level.passesDocuments || level.orderBy != nil || level.limit != nil || level.offset != nil { level = wrap(level) }
                level.orderBy = try sort(value, compiler: &compiler)
            case "$skip":
                let skip = try count(value, name)
                if level.limit != nil || level.offset != nil { level = wrap(level) }
                level.offset = skip
            case "$limit":
                let limit = try count(value, name)
                if level.limit != nil { level = wrap(level) }
                level.limit = limit
            case "$count":
                guard case .string(let field) = value, FieldPath.isValidName(field) else { throw .invalidQuery("$count expects a field name") }
                level = wrap(level)
                level.select = "jsonb_build_object(\(try compiler.writer.bind(.text(field), as: "text")), count(*))"
            default:
                throw .invalidQuery("Unsupported aggregate stage \(name)")
            }
        }
        level.limit = min(level.limit ?? Int.max, maxRows + 1)
        return CompiledQuery(sql: level.sql, parameters: compiler.writer.parameters, usesRegex: compiler.usesRegex)
    }

    /// The class's rows as documents: `data` with `objectId`, `createdAt`, `updatedAt` and the
    /// typed columns (never the hidden ones) as a read returns them.
    private static func baseLevel(layout: TableLayout, where whereValue: JSONValue?, compiler: inout WhereCompiler) throws(QueryError) -> Level {
        var members: [String] = []
        for field in ["objectId", "createdAt", "updatedAt"] + layout.columns.map(\.field) where !layout.hiddenFields.contains(field) {
            let name = try compiler.writer.bind(.text(field), as: "text")
            members.append(name + ", " + (try compiler.jsonValue(of: field, key: "aggregate")))
        }
        let standard = "jsonb_strip_nulls(jsonb_build_object(" + members.joined(separator: ", ") + "))"
        let document = (layout.dataColumn.map { "COALESCE(\($0), '{}'::jsonb)" } ?? "'{}'::jsonb") + " || " + standard
        var level = Level(select: document, from: layout.table)
        level.predicates = try QueryCompiler.accessPredicates(layout: layout, readerIDs: nil, writer: &compiler.writer)
        switch whereValue {
        case nil, .null?: break
        case .object(let object)?: level.predicates.append(contentsOf: try compiler.compile(object))
        default: throw .invalidQuery("where must be a JSON object")
        }
        return level
    }

    /// `$field` (or `$a.b`) as the jsonb value of the document; `$_created_at`/`$_updated_at` as
    /// Parse Server names them, `$_id` for `objectId`.
    private static func documentValue(_ reference: String, compiler: inout WhereCompiler) throws(QueryError) -> String {
        guard reference.hasPrefix("$") else { throw .invalidQuery("\(reference) is not a field reference (\"$field\")") }
        var field = String(reference.dropFirst())
        switch field {
        case "_created_at": field = "createdAt"
        case "_updated_at": field = "updatedAt"
        case "_id": field = "objectId"
        default: break
        }
        guard FieldPath.isValidPath(field) else { throw .invalidQuery("invalid field name: \(field)") }
        let path = field.split(separator: ".").map(String.init)
        let key = try compiler.writer.bindKey(path)
        return "(doc" + (path.count == 1 ? " -> " : " #> ") + key + ")"
    }

    /// A non-negative integer operand of `$limit`/`$skip`.
    private static func count(_ value: JSONValue, _ name: String) throws(QueryError) -> Int {
        guard case .int(let number) = value, number >= 0, number <= Int64(ParseQuery.maxSkip) else {
            throw .invalidQuery("\(name) expects an integer between 0 and \(ParseQuery.maxSkip)")
        }
        return Int(number)
    }

    /// `$group`: `{"_id": key, "<name>": {"$sum"|"$avg"|"$min"|"$max"|"$push"|"$addToSet": operand}, …}`.
    /// The key is null (one group), `"$field"`, or an object of `"$field"`s and date parts
    /// (`{"$year": "$createdAt"}`); it comes back as `objectId`, as Parse Server returns it.
    private static func group(_ value: JSONValue, from level: Level, number: inout Int, compiler: inout WhereCompiler) throws(QueryError) -> Level {
        guard case .object(let spec) = value, let keySpec = spec["_id"] else { throw .invalidQuery("Invalid parameter for query: group. Missing key _id") }
        guard spec.count <= maxFields + 1 else { throw .invalidQuery("$group has more than \(maxFields) fields") }
        let key: String
        switch keySpec {
        case .string(let reference) where !reference.isEmpty:
            key = try documentValue(reference, compiler: &compiler)
        case .object(let parts) where !parts.isEmpty:
            guard parts.count <= maxFields else { throw .invalidQuery("$group _id has more than \(maxFields) fields") }
            var members: [String] = []
            for (alias, part) in parts {
                guard FieldPath.isValidName(alias) else { throw .invalidQuery("invalid $group _id field name: \(alias)") }
                let name = try compiler.writer.bind(.text(alias), as: "text")
                members.append(name + ", " + (try groupKeyPart(part, compiler: &compiler)))
            }
            key = "jsonb_build_object(" + members.joined(separator: ", ") + ")"
        default:
            key = "NULL::jsonb"
        }
        var outputs = ["'objectId', g.k"]
        for (field, accumulator) in spec where field != "_id" {
            guard FieldPath.isValidName(field) else { throw .invalidQuery("invalid $group field name: \(field)") }
            guard case .object(let operation) = accumulator, operation.count == 1, let (op, operand) = operation.first else {
                throw .invalidQuery("$group field \(field) expects one accumulator, as {\"$sum\": \"$field\"}")
            }
            let name = try compiler.writer.bind(.text(field), as: "text")
            outputs.append(name + ", " + (try accumulate(op, operand, field: field, compiler: &compiler)))
        }
        number += 1
        var grouped = Level(select: "jsonb_build_object(" + outputs.joined(separator: ", ") + ")",
                            from: "(SELECT " + key + " AS k, doc FROM (" + level.sql + ") AS s" + String(number) + ") AS g")
        grouped.groupBy = "g.k"
        return grouped
    }

    private static func groupKeyPart(_ part: JSONValue, compiler: inout WhereCompiler) throws(QueryError) -> String {
        switch part {
        case .string(let reference):
            return try documentValue(reference, compiler: &compiler)
        case .object(let operation) where operation.count == 1:
            let (op, operand) = operation[0]
            guard let extract = dateParts[op], case .string(let reference) = operand else {
                throw .invalidQuery("unsupported $group _id operator \(op)")
            }
            let value = try documentValue(reference, compiler: &compiler)
            let iso = "COALESCE(\(value) ->> 'iso', \(value) #>> '{}')"
            return "CASE WHEN jsonb_typeof(\(value)) IN ('string', 'object') AND \(iso) ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$'"
                + " THEN to_jsonb(EXTRACT(\(extract) FROM \(iso)::timestamptz AT TIME ZONE 'UTC')::integer) END"
        default:
            throw .invalidQuery("$group _id fields expect \"$field\" or a date operator")
        }
    }

    /// An accumulator over the group's documents (`g.doc`); numbers only for arithmetic.
    private static func accumulate(_ op: String, _ operand: JSONValue, field: String, compiler: inout WhereCompiler) throws(QueryError) -> String {
        if op == "$sum", !(operand.string?.hasPrefix("$") ?? false) {
            switch operand {
            case .int(let step): return "count(*) * \(try compiler.writer.bind(.int(Int(step)), as: "int8"))"
            case .double(let step): return "count(*) * \(try compiler.writer.bind(.double(step), as: "float8"))"
            default: throw .invalidQuery("$sum on \(field) expects \"$field\" or a number")
            }
        }
        guard case .string(let reference) = operand else { throw .invalidQuery("\(op) on \(field) expects \"$field\"") }
        let value = try documentValue(reference, compiler: &compiler)
        let number = "CASE WHEN jsonb_typeof(\(value)) = 'number' THEN (\(value) #>> '{}')::numeric END"
        switch op {
        case "$sum": return "COALESCE(sum(\(number)), 0)"
        case "$avg": return "avg(\(number))::float8"
        case "$min": return "min(\(number))"
        case "$max": return "max(\(number))"
        case "$push": return "COALESCE(jsonb_agg(\(value)) FILTER (WHERE \(value) IS NOT NULL), '[]'::jsonb)"
        case "$addToSet": return "COALESCE(jsonb_agg(DISTINCT \(value)) FILTER (WHERE \(value) IS NOT NULL), '[]'::jsonb)"
        default: throw .invalidQuery("unsupported $group accumulator \(op)")
        }
    }

    /// `$project`: `{"field": 1|true, …}` keeps those fields and `objectId` (unless `"objectId": 0`);
    /// `{"field": 0|false, …}` removes them. Other values (expressions) → 102.
    private static func project(_ value: JSONValue, compiler: inout WhereCompiler) throws(QueryError) -> String {
        guard case .object(let spec) = value, !spec.isEmpty, spec.count <= maxFields else {
            throw .invalidQuery("$project expects an object of at most \(maxFields) fields")
        }
        var included: [String] = []
        var excluded: [String] = []
        for (field, flag) in spec {
            guard FieldPath.isValidName(field) else { throw .invalidQuery("$project supports top-level fields only: \(field)") }
            switch flag {
            case .int(1), .bool(true): included.append(field)
            case .int(0), .bool(false): excluded.append(field)
            default: throw .invalidQuery("$project on \(field) expects 1 or 0 (expressions are not supported)")
            }
        }
        if included.isEmpty {
            return "doc - \(try compiler.writer.bind(.textArray(excluded), as: "text[]"))"
        }
        guard excluded.allSatisfy({ $0 == "objectId" }) else { throw .invalidQuery("$project cannot mix inclusion and exclusion") }
        if excluded.isEmpty, !included.contains("objectId") { included.append("objectId") }
        let keys = try compiler.writer.bind(.textArray(included), as: "text[]")
        return "(SELECT COALESCE(jsonb_object_agg(e.key, e.value), '{}'::jsonb) FROM jsonb_each(doc) AS e WHERE e.key = ANY(\(keys)))"
    }

    /// `$sort`: `{"field": 1|-1, …}`, jsonb order, missing fields first ascending.
    private static func sort(_ value: JSONValue, compiler: inout WhereCompiler) throws(QueryError) -> String {
        guard case .object(let spec) = value, !spec.isEmpty, spec.count <= maxFields else {
            throw .invalidQuery("$sort expects an object of at most \(maxFields) fields")
        }
        var terms: [String] = []
        for (field, direction) in spec {
            let value = try documentValue("$" + field, compiler: &compiler)
            switch direction {
            case .int(1): terms.append(value + " NULLS FIRST")
            case .int(-1): terms.append(value + " DESC NULLS LAST")
            default: throw .invalidQuery("$sort on \(field) expects 1 or -1")
            }
        }
        return terms.joined(separator: ", ")
    }
}
