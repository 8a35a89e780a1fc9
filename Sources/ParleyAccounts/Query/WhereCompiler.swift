import ParleyJSON
import ParleyPostgres

/// Where a field lives: a typed column, or a key (path) of the jsonb data column.
enum FieldTarget {
    case column(sql: String, type: TableLayout.ColumnType)
    /// A key (`path.count == 1`) or a dotted path of the jsonb data column.
    case custom(path: [String])
}

/// The query's `$nearSphere`, kept so the SELECT can order by distance and, when it is the only
/// condition, scan nearest-first with a bounded LIMIT (see `QueryCompiler`).
struct NearSphere {
    /// `geo <-> ll_to_earth(…)`: GiST KNN order (chord distance, the same order as great-circle).
    var order: String
    /// The whole constraint, as placed among the `where` predicates.
    var predicate: String
    /// `geo IS NOT NULL AND data @> {"field":{"__type":"GeoPoint"}}`.
    var fieldGuard: String
    /// The geo column.
    var geo: String
    /// The centre as the cube `ll_to_earth` returns, written out (see `WhereCompiler.earthCube`).
    var centerCube: String
    /// The maximum distance as a central angle, and the `$n` it is bound to (`parameters[n - 1]`);
    /// nil when no maximum distance is given.
    var maxAngle: (reference: String, parameter: Int, radians: Double)?
}

/// Compiles a `where` object into SQL predicates, binding every value as a parameter.
struct WhereCompiler {
    let layout: TableLayout
    /// The ids a row's ACL must grant read to; nil for the master key.
    let readerIDs: [String]?
    var isMaster: Bool { readerIDs == nil }
    /// Top-level fields that are Relations (`ParseQuery.relationFields`).
    let relationFields: Set<String>
    /// What the viewer may read of each subquery class (`ParseQuery.subqueryScopes`).
    let subqueryScopes: [String: SubqueryScope]
    /// How many subqueries this one is inside.
    let subqueryDepth: Int
    var writer = SQLWriter()
    /// A `$regex` was compiled.
    var usesRegex = false
    /// The query's `$nearSphere`, if it has one.
    private(set) var nearSphere: NearSphere?
    /// `ts_rank_cd(…)` of the query's `$text`, for `order=$score` and `keys=$score`.
    var textRank: String?
    /// Conditions counted so far (`QueryCompiler.maxConditions`), shared with subqueries.
    var conditions = 0

    init(layout: TableLayout, readerIDs: [String]?, relationFields: Set<String> = [], subqueryScopes: [String: SubqueryScope] = [:],
         subqueryDepth: Int = 0) {
        self.layout = layout
        self.readerIDs = readerIDs
        self.relationFields = relationFields
        self.subqueryScopes = subqueryScopes
        self.subqueryDepth = subqueryDepth
    }

    // MARK: - Objects, $or and $and

    /// The predicates of a `where` object (to be joined with AND); empty matches everything.
    mutating func compile(_ object: JSONObject, depth: Int = 0, insideOr: Bool = false) throws(QueryError) -> [String] {
        var predicates: [String] = []
        for (key, value) in object {
            if key.hasPrefix("$") {
                predicates.append(try compileLogical(key, value, depth: depth, insideOr: insideOr))
            } else if depth == 0, relationFields.contains(key) {
                predicates.append(try relationHolds(value, field: key))
            } else {
                let target = try resolve(key)
                predicates.append(contentsOf: try compileConstraint(value, on: target, field: key, insideOr: insideOr))
            }
        }
        return predicates
    }

    private mutating func compileLogical(_ key: String, _ value: JSONValue, depth: Int, insideOr: Bool) throws(QueryError) -> String {
        switch key {
        case "$or", "$and", "$nor":
            guard depth < QueryCompiler.maxNesting else {
                throw .invalidQuery("\(key) nested deeper than \(QueryCompiler.maxNesting) levels")
            }
            guard case .array(let branches) = value, !branches.isEmpty else {
                throw .invalidQuery("\(key) expects a non-empty array of where objects")
            }
            guard branches.count <= QueryCompiler.maxListCount else {
                throw .invalidQuery("\(key) has more than \(QueryCompiler.maxListCount) branches")
            }
            var parts: [String] = []
            for branch in branches {
                guard case .object(let object) = branch else { throw .invalidQuery("\(key) expects an array of where objects") }
                let predicates = try compile(object, depth: depth + 1, insideOr: insideOr || key != "$and")
                parts.append(Self.conjunction(predicates))
            }
            try count()
            // `$nor`: no branch holds (a branch that is NULL for a row, a missing field, does not hold).
            if key == "$nor" { return "NOT COALESCE(" + parts.joined(separator: " OR ") + ", false)" }
            if parts.count == 1 { return parts[0] }
            return "(" + parts.joined(separator: key == "$or" ? " OR " : " AND ") + ")"
        case "$relatedTo":
            return try relatedTo(value)
        case "$text", "$where", "$expr", "$comment":
            throw .invalidQuery("\(key) is not supported")
        default:
            throw .invalidQuery("unknown top-level operator \(key)")
        }
    }

    /// `$relatedTo: {"object": <owner Pointer>, "key": <its Relation field>}`: the rows in the
    /// owner's relation, `object_id IN (SELECT parley_relation_ids($table, $owner))` (no rows
    /// while the join table does not exist; migrations/0018_relations.sql).
    private mutating func relatedTo(_ value: JSONValue) throws(QueryError) -> String {
        guard case .object(let operand) = value, case .object(let owner)? = operand["object"], owner["__type"]?.string == "Pointer",
              let ownerClass = owner["className"]?.string, ClassName.isValid(ownerClass) || ClassName.isSystem(ownerClass),
              let ownerId = owner["objectId"]?.string, !ownerId.isEmpty, ownerId.utf8.count <= 120, !ownerId.utf8.contains(0),
              let key = operand["key"]?.string, FieldPath.isValidName(key) else {
            throw .invalidQuery("$relatedTo expects {\"object\": a Pointer, \"key\": the name of a Relation field}")
        }
        let table = RelationWriter.joinTable(field: key, className: ownerClass)
        guard table.utf8.count <= RelationWriter.maxJoinTableBytes else { throw .invalidQuery("$relatedTo: the relation \(key) of \(ownerClass) has too long a name") }
        try count()
        return "object_id IN (SELECT parley_relation_ids(" + (try writer.bind(.text(table), as: "text")) + ", "
            + (try writer.bind(.text(ownerId), as: "text")) + "))"
    }

    /// `{"<Relation field>": <Pointer>}`: the rows whose relation holds the pointed-to object,
    /// `object_id IN (SELECT parley_relation_owners($table, $related))` (Parse Server's
    /// `reduceInRelation` for equality).
    private mutating func relationHolds(_ value: JSONValue, field: String) throws(QueryError) -> String {
        guard case .object(let pointer) = value, pointer["__type"]?.string == "Pointer", let id = pointer["objectId"]?.string,
              !id.isEmpty, id.utf8.count <= 120, !id.utf8.contains(0) else {
            throw .invalidQuery("\(field) is a Relation: query it with a Pointer")
        }
        let table = RelationWriter.joinTable(field: field, className: layout.className)
        guard table.utf8.count <= RelationWriter.maxJoinTableBytes else { throw .invalidQuery("the relation \(field) has too long a name") }
        try count()
        return "object_id IN (SELECT parley_relation_owners(" + (try writer.bind(.text(table), as: "text")) + ", "
            + (try writer.bind(.text(id), as: "text")) + "))"
    }

    /// Predicates joined with AND and parenthesised; `TRUE` for none.
    static func conjunction(_ predicates: [String]) -> String {
        switch predicates.count {
        case 0: "TRUE"
        case 1: predicates[0]
        default: "(" + predicates.joined(separator: " AND ") + ")"
        }
    }

    private mutating func count() throws(QueryError) {
        conditions += 1
        guard conditions <= QueryCompiler.maxConditions else {
            throw .invalidQuery("the query has more than \(QueryCompiler.maxConditions) conditions")
        }
    }

    // MARK: - Fields

    /// The column or jsonb path of a field, after the layout's access rules.
    mutating func resolve(_ field: String) throws(QueryError) -> FieldTarget {
        let path: [String]?
        let head: String
        if FieldPath.isValidName(field) {
            path = nil
            head = field
        } else {
            guard FieldPath.isValidPath(field) else { throw .invalidQuery("invalid field name: \(field)") }
            let segments = field.split(separator: ".").map(String.init)
            path = segments
            head = segments[0]
        }
        if head == "ACL" || layout.hiddenFields.contains(head) {
            throw .invalidQuery("\(head) cannot be queried on \(layout.className)")
        }
        if layout.masterOnlyFields.contains(head) && !isMaster {
            throw .operationForbidden("This user is not allowed to query \(head) on class \(layout.className)")
        }
        let standard: (String, TableLayout.ColumnType)? = switch head {
        case "objectId": ("object_id", .string)
        case "createdAt": ("created_at", .date)
        case "updatedAt": ("updated_at", .date)
        default: layout.column(forField: head).map { ($0.column, $0.type) }
        }
        if let (column, type) = standard {
            guard path == nil else { throw .invalidQuery("\(head) has no subfields to query (\(field))") }
            return .column(sql: column, type: type)
        }
        guard layout.dataColumn != nil else {
            throw .invalidQuery("\(layout.className) has no field \(head)")
        }
        return .custom(path: path ?? [field])
    }

    /// `(data -> $n::text)` or `(data #> $n::text[])`. The key is bound on first use, so a
    /// constraint that compiles to a constant leaves no unused (untyped) parameter behind.
    mutating func expression(_ path: [String]) throws(QueryError) -> String {
        let data = layout.dataColumn ?? "data"
        let key = try writer.bindKey(path)
        return "(" + data + (path.count == 1 ? " -> " : " #> ") + key + ")"
    }

    // MARK: - Constraints

    private static let operators: Set<String> = [
        "$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$all", "$exists", "$regex", "$options",
        "$nearSphere", "$maxDistance", "$maxDistanceInRadians", "$maxDistanceInKilometers", "$maxDistanceInMiles",
        "$within", "$geoWithin", "$containedBy", "$text", "$inQuery", "$notInQuery", "$select", "$dontSelect",
    ]
    private static let unsupportedOperators: Set<String> = [
        "$relatedTo", "$geoIntersects",
        "$elemMatch", "$near", "$not", "$size", "$type", "$mod", "$relativeTime", "$polygon",
    ]

    private mutating func compileConstraint(_ value: JSONValue, on target: FieldTarget, field: String, insideOr: Bool) throws(QueryError) -> [String] {
        guard case .object(let object) = value, object["__type"] == nil, object.keys.contains(where: { $0.hasPrefix("$") }) else {
            try count()
            return [try equality(try QueryOperand(value, field: field), on: target)]
        }
        var predicates: [String] = []
        for (key, operand) in object {
            guard key.hasPrefix("$") else {
                throw .invalidQuery("the constraint on \(field) mixes operators and the plain key \(key)")
            }
            guard Self.operators.contains(key) else {
                if Self.unsupportedOperators.contains(key) { throw .invalidQuery("\(key) is not supported (on \(field))") }
                throw .invalidQuery("unknown operator \(key) on \(field)")
            }
            try count()
            switch key {
            case "$eq":
                predicates.append(try equality(try QueryOperand(operand, field: field), on: target))
            case "$ne":
                predicates.append(try notEqual(try QueryOperand(operand, field: field), on: target))
            case "$lt", "$lte", "$gt", "$gte":
                predicates.append(try comparison(key, operand, on: target, field: field))
            case "$in", "$nin":
                let match = try membership(key, operand, on: target, field: field)
                predicates.append(key == "$in" ? match : "NOT COALESCE(\(match), false)")
            case "$all":
                predicates.append(try containsAll(operand, on: target, field: field))
            case "$containedBy":
                predicates.append(try containedBy(operand, on: target, field: field))
            case "$text":
                predicates.append(try text(operand, on: target, field: field))
            case "$inQuery", "$notInQuery":
                let match = try inQuery(key, operand, on: target, field: field)
                predicates.append(key == "$inQuery" ? match : "NOT COALESCE(\(match), false)")
            case "$select", "$dontSelect":
                let match = try select(key, operand, on: target, field: field)
                predicates.append(key == "$select" ? match : "NOT COALESCE(\(match), false)")
            case "$exists":
                guard case .bool(let exists) = operand else { throw .invalidQuery("$exists on \(field) expects true or false") }
                predicates.append(try presence(exists, of: target))
            case "$regex":
                predicates.append(try regex(operand, options: object["$options"], on: target, field: field))
            case "$options":
                guard object["$regex"] != nil else { throw .invalidQuery("$options on \(field) needs $regex") }
            case "$nearSphere":
                predicates.append(try nearSphere(operand, constraint: object, on: target, field: field, insideOr: insideOr))
            case "$within":
                guard case .object(let within) = operand, within.count == 1, let box = within["$box"] else {
                    throw .invalidQuery("$within on \(field) expects {\"$box\": [southwest, northeast]}")
                }
                predicates.append(try withinBox(box, on: target, field: field))
            case "$geoWithin":
                guard case .object(let within) = operand, within.count == 1, let (shape, argument) = within.first else {
                    throw .invalidQuery("$geoWithin on \(field) expects {\"$centerSphere\": …} or {\"$box\": …}")
                }
                switch shape {
                case "$centerSphere": predicates.append(try centerSphere(argument, on: target, field: field))
                case "$box": predicates.append(try withinBox(argument, on: target, field: field))
                case "$polygon": predicates.append(try withinPolygon(argument, on: target, field: field))
                default: throw .invalidQuery("unknown $geoWithin shape \(shape) on \(field)")
                }
            default:
                // $maxDistance and its variants are read by $nearSphere.
                guard object["$nearSphere"] != nil else { throw .invalidQuery("\(key) on \(field) needs $nearSphere") }
            }
        }
        return predicates
    }

    // MARK: - Equality

    private mutating func equality(_ operand: QueryOperand, on target: FieldTarget) throws(QueryError) -> String {
        switch target {
        case .column(let column, let type):
            guard let (parameter, _) = try columnValue(operand, type: type) else {
                return operand == .null ? "\(column) IS NULL" : "FALSE"
            }
            return column + " = " + parameter
        case .custom(let path):
            let t = try expression(path)
            switch operand {
            case .null:
                return try presence(false, of: target)
            case .scalar(let value):
                return t + " @> " + (try writer.bindJSON(value))
            case .typed(let value):
                let parameter = try writer.bindJSON(value)
                return "(\(t) @> \(parameter) OR \(t) @> jsonb_build_array(\(parameter)))"
            case .structured(let value):
                return "\(t) = \(try writer.bindJSON(value))"
            }
        }
    }

    private mutating func notEqual(_ operand: QueryOperand, on target: FieldTarget) throws(QueryError) -> String {
        if case .column(let column, let type) = target {
            guard let (parameter, _) = try columnValue(operand, type: type) else {
                return operand == .null ? "\(column) IS NOT NULL" : "TRUE"
            }
            return "\(column) IS DISTINCT FROM \(parameter)"
        }
        if operand == .null { return try presence(true, of: target) }
        return "NOT COALESCE(\(try equality(operand, on: target)), false)"
    }

    /// `$exists`: a stored JSON null counts as missing.
    mutating func presence(_ exists: Bool, of target: FieldTarget) throws(QueryError) -> String {
        switch target {
        case .column(let column, _):
            return exists ? "\(column) IS NOT NULL" : "\(column) IS NULL"
        case .custom(let path):
            let t = try expression(path)
            return exists ? "(\(t) IS NOT NULL AND \(t) <> 'null'::jsonb)" : "(\(t) IS NULL OR \(t) = 'null'::jsonb)"
        }
    }

    /// The parameter for comparing a typed column with `operand` and the element type for arrays
    /// of it; nil when the operand is null or cannot equal any value of the column.
    private mutating func columnValue(_ operand: QueryOperand, type: TableLayout.ColumnType) throws(QueryError) -> (String, String)? {
        guard let (data, cast) = try Self.columnData(operand, type: type) else { return nil }
        return (try writer.bind(data, as: cast), cast)
    }

    /// `operand` encoded for a typed column, with its SQL type; nil when no value of the column
    /// can equal it.
    private static func columnData(_ operand: QueryOperand, type: TableLayout.ColumnType) throws(QueryError) -> (PostgresData, String)? {
        switch (type, operand) {
        case (_, .null):
            return nil
        case (.string, .scalar(.string(let text))):
            return (.text(text), "text")
        case (.boolean, .scalar(.bool(let flag))):
            return (.bool(flag), "boolean")
        case (.date, .scalar(let value)), (.date, .typed(let value)):
            guard let milliseconds = try QueryOperand.dateMilliseconds(value, field: "the date") else { return nil }
            return (.timestamp(milliseconds: milliseconds), "timestamptz")
        case (.pointer(let targetClass), .typed(let value)):
            guard operand.typeName == "Pointer", value["className"]?.string == targetClass,
                  let objectId = value["objectId"]?.string else { return nil }
            return (.text(objectId), "text")
        case (.object, _):
            return (.json(operand.json.serialized()), "jsonb")
        default:
            return nil
        }
    }

    // MARK: - Comparisons

    private mutating func comparison(_ key: String, _ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let op = switch key {
        case "$lt": "<"
        case "$lte": "<="
        case "$gt": ">"
        default: ">="
        }
        guard !QueryOperand.containsNUL(operand) else { throw .invalidQuery("\(key) on \(field): values cannot contain U+0000") }
        switch target {
        case .column(let column, let type):
            switch (type, operand) {
            case (.string, .string(let text)):
                return "\(column) \(op) \(try writer.bind(.text(text), as: "text"))"
            case (.date, _):
                guard let milliseconds = try QueryOperand.dateMilliseconds(operand, field: field) else {
                    throw .invalidQuery("\(key) on \(field) expects a Date")
                }
                return "\(column) \(op) \(try writer.bind(.timestamp(milliseconds: milliseconds), as: "timestamptz"))"
            case (.string, _):
                throw .invalidQuery("\(key) on \(field) expects a string")
            default:
                throw .invalidQuery("\(key) is not supported on \(field)")
            }
        case .custom(let path):
            let t = try expression(path)
            switch operand {
            case .int, .double:
                return "(jsonb_typeof(\(t)) = 'number' AND \(t) \(op) \(try writer.bindJSON(operand)))"
            case .string:
                return "(jsonb_typeof(\(t)) = 'string' AND \(t) \(op) \(try writer.bindJSON(operand)))"
            case .object(let object) where object["__type"]?.string == "Date":
                let iso = try QueryOperand.canonicalDate(object, field: field).iso
                return "((\(t) ->> '__type') = 'Date' AND (\(t) ->> 'iso') \(op) \(try writer.bind(.text(iso), as: "text")) COLLATE \"C\")"
            default:
                throw .invalidQuery("\(key) on \(field) expects a number, a string or a Date")
            }
        }
    }

    // MARK: - Lists

    private func list(_ key: String, _ operand: JSONValue, field: String) throws(QueryError) -> [QueryOperand] {
        guard case .array(let items) = operand else { throw .invalidQuery("\(key) on \(field) expects an array") }
        guard items.count <= QueryCompiler.maxListCount else {
            throw .invalidQuery("\(key) on \(field) has more than \(QueryCompiler.maxListCount) values")
        }
        var operands: [QueryOperand] = []
        for item in items {
            let operand = try QueryOperand(item, field: field)
            if case .structured = operand {
                throw .invalidQuery("\(key) on \(field) accepts strings, numbers, booleans, null, Dates and Pointers")
            }
            operands.append(operand)
        }
        return operands
    }

    /// `$in`: the field (or, for an array field, any of its elements) equals one of the values.
    private mutating func membership(_ key: String, _ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let operands = try list(key, operand, field: field)
        let values = operands.filter { $0 != .null }
        var alternatives: [String] = []
        switch target {
        case .column(let column, let type):
            if case .object = type {
                if !values.isEmpty {
                    let parameter = try writer.bindJSON(.array(values.map(\.json)))
                    alternatives.append("EXISTS (SELECT 1 FROM jsonb_array_elements(\(parameter)) AS e(v) WHERE \(column) = e.v)")
                }
            } else {
                var texts: [String] = []
                var cast = "text"
                for value in values {
                    guard let (data, elementCast) = try Self.columnData(value, type: type) else { continue }
                    cast = elementCast
                    texts.append(data.textValue ?? "")
                }
                if !texts.isEmpty {
                    alternatives.append("\(column) = ANY(\(try writer.bind(.textArray(texts), as: cast + "[]")))")
                }
            }
        case .custom(let path):
            if !values.isEmpty {
                let t = try expression(path)
                let parameter = try writer.bindJSON(.array(values.map(\.json)))
                let typed = values.contains { if case .typed = $0 { true } else { false } }
                let match = typed ? "\(t) @> e.v OR \(t) @> jsonb_build_array(e.v)" : "\(t) @> e.v"
                alternatives.append("EXISTS (SELECT 1 FROM jsonb_array_elements(\(parameter)) AS e(v) WHERE \(match))")
            }
        }
        if values.count < operands.count { alternatives.append(try presence(false, of: target)) }
        switch alternatives.count {
        case 0: return "FALSE"
        case 1: return alternatives[0]
        default: return "(" + alternatives.joined(separator: " OR ") + ")"
        }
    }

    /// `$all`: an array field holding every value.
    private mutating func containsAll(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let operands = try list("$all", operand, field: field)
        if case .column(_, let type) = target, type != .object {
            throw .invalidQuery("$all on \(field) needs an array field")
        }
        if operands.isEmpty { return "FALSE" }
        let t: String
        switch target {
        case .custom(let path): t = try expression(path)
        case .column(let column, _): t = column
        }
        return "\(t) @> \(try writer.bindJSON(.array(operands.map(\.json))))"
    }

    /// `$containedBy`: an array field every element of which is in the list (an empty array
    /// included; a missing field or a non-array does not match).
    private mutating func containedBy(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let operands = try list("$containedBy", operand, field: field)
        guard case .custom(let path) = target else { throw .invalidQuery("$containedBy on \(field) needs an array field") }
        let t = try expression(path)
        return "(jsonb_typeof(\(t)) = 'array' AND \(t) <@ \(try writer.bindJSON(.array(operands.map(\.json)))))"
    }

    // MARK: - $regex

    private mutating func regex(_ operand: JSONValue, options: JSONValue?, on target: FieldTarget, field: String) throws(QueryError) -> String {
        guard case .string(let pattern) = operand else { throw .invalidQuery("$regex on \(field) expects a string") }
        guard pattern.utf8.count <= QueryCompiler.maxRegexBytes else {
            throw .invalidQuery("$regex on \(field) is longer than \(QueryCompiler.maxRegexBytes) bytes")
        }
        var flags = Set<Character>()
        if let options {
            guard case .string(let text) = options, text.allSatisfy({ "imxs".contains($0) }) else {
                throw .invalidQuery("Bad $options value on \(field): only i, m, x and s are supported")
            }
            flags = Set(text)
        }
        let postgresPattern = Self.postgresPattern(pattern, flags: flags)
        usesRegex = true
        switch target {
        case .column(let column, .string):
            return "\(column) ~ \(try writer.bind(.text(postgresPattern), as: "text"))"
        case .column:
            throw .invalidQuery("$regex on \(field) needs a string field")
        case .custom(let path):
            let t = try expression(path)
            return "(jsonb_typeof(\(t)) = 'string' AND (\(t) #>> '{}') ~ \(try writer.bind(.text(postgresPattern), as: "text")))"
        }
    }

    /// The pattern prefixed with PostgreSQL embedded options that give JavaScript/PCRE newline
    /// semantics: `.` stops at newlines unless `s`; `^`/`$` match at line breaks only with `m`.
    static func postgresPattern(_ pattern: String, flags: Set<Character>) -> String {
        var embedded = switch (flags.contains("m"), flags.contains("s")) {
        case (false, false): "p"
        case (true, false): "n"
        case (false, true): "s"
        case (true, true): "w"
        }
        if flags.contains("i") { embedded += "i" }
        if flags.contains("x") { embedded += "x" }
        return "(?\(embedded))" + RegexLiteralBlocks.rewrite(pattern)
    }

    // MARK: - Geo

    /// The geo column, and the guard that the queried field is the GeoPoint the column mirrors.
    ///
    /// The guard is a jsonb containment (`data @> {"field":{"__type":"GeoPoint"}}`) rather than
    /// `->> '__type' = …` because PostgreSQL estimates it from the column's statistics (≈ every
    /// row) instead of a 0.5% default; with the default, the planner underestimates the rows in
    /// the radius and sorts a bitmap scan of the whole box instead of walking the GiST index in
    /// distance order, which is 1000× slower for wide radii.
    private mutating func geoField(_ target: FieldTarget, _ op: String, field: String) throws(QueryError) -> (geo: String, guard: String) {
        guard case .custom(let path) = target, path.count == 1 else {
            throw .invalidQuery("\(op) needs a GeoPoint field; \(field) is not one")
        }
        guard let geo = layout.geoColumn, let data = layout.dataColumn else {
            throw .invalidQuery("\(op): \(layout.className) has no GeoPoint field")
        }
        let shape = try writer.bindJSON(.object([path[0]: ["__type": "GeoPoint"]]))
        return (geo, "\(data) @> \(shape)")
    }

    private mutating func earthPoint(_ point: GeoMath.Point) throws(QueryError) -> (latitude: String, longitude: String) {
        let latitude = try writer.bind(.double(point.latitude), as: "float8")
        let longitude = try writer.bind(.double(point.longitude), as: "float8")
        return (latitude, longitude)
    }

    /// `ll_to_earth(latitude, longitude)` as the cube expression earthdistance defines it with,
    /// for the nearest-first statement. The planner folds it to a constant with built-in
    /// functions only; it folds the SQL function `ll_to_earth` by running it through the SQL
    /// function executor, which parses its body again at every call (about 0.1 ms of planning
    /// per occurrence, measured; docs/performance.md, "Nearby tail latency"). Same operations
    /// in the same order, so the same point, bit for bit.
    static func earthCube(latitude: String, longitude: String) -> String {
        "cube(cube(cube(earth() * cos(radians(\(latitude))) * cos(radians(\(longitude)))),"
            + " earth() * cos(radians(\(latitude))) * sin(radians(\(longitude)))), earth() * sin(radians(\(latitude))))"
    }

    /// The index-backed box test and the exact test for "within the central angle `radians` of
    /// `center`". `earth_box` bounds the circle (GiST `@>`); `earth_distance` decides.
    /// Also returns the angle's `$n::float8`.
    private mutating func withinAngle(_ center: String, radians: Double, geo: String) throws(QueryError) -> (box: String, distance: String, angle: String) {
        let angle = try writer.bind(.double(radians), as: "float8")
        return ("earth_box(\(center), \(angle) * earth()) @> \(geo)", "earth_distance(\(center), \(geo)) <= \(angle) * earth()", angle)
    }

    private mutating func nearSphere(_ operand: JSONValue, constraint: JSONObject, on target: FieldTarget, field: String, insideOr: Bool) throws(QueryError) -> String {
        let (geo, fieldGuard) = try geoField(target, "$nearSphere", field: field)
        guard !insideOr else { throw .invalidQuery("$nearSphere cannot be used inside $or (on \(field))") }
        guard nearSphere == nil else { throw .invalidQuery("only one $nearSphere is allowed per query") }
        let point = try GeoMath.point(operand, "$nearSphere on \(field)")
        var radians: Double?
        for (key, scale) in [("$maxDistance", 1.0), ("$maxDistanceInRadians", 1.0),
                             ("$maxDistanceInKilometers", GeoMath.kilometersPerRadian), ("$maxDistanceInMiles", GeoMath.milesPerRadian)] {
            guard let value = constraint[key] else { continue }
            guard radians == nil else { throw .invalidQuery("$nearSphere on \(field) takes one $maxDistance") }
            radians = try GeoMath.distance(value, "\(key) on \(field)") / scale
        }
        let (latitude, longitude) = try earthPoint(point)
        let center = "ll_to_earth(\(latitude), \(longitude))"
        var near = NearSphere(order: "\(geo) <-> \(center)", predicate: "", fieldGuard: "\(geo) IS NOT NULL AND \(fieldGuard)",
                              geo: geo, centerCube: Self.earthCube(latitude: latitude, longitude: longitude))
        if let radians {
            let (box, distance, angle) = try withinAngle(center, radians: radians, geo: geo)
            near.maxAngle = (angle, writer.parameters.count, radians)
            near.predicate = "(\(box) AND \(distance) AND \(fieldGuard))"
        } else {
            near.predicate = "(\(near.fieldGuard))"
        }
        nearSphere = near
        return near.predicate
    }

    private mutating func centerSphere(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let (geo, fieldGuard) = try geoField(target, "$centerSphere", field: field)
        guard case .array(let parts) = operand, parts.count == 2 else {
            throw .invalidQuery("$centerSphere on \(field) expects [GeoPoint or [longitude, latitude], radians]")
        }
        let point = try GeoMath.pointOrPair(parts[0], "$centerSphere on \(field)")
        let radians = try GeoMath.distance(parts[1], "the $centerSphere distance on \(field)")
        let (latitude, longitude) = try earthPoint(point)
        let (box, distance, _) = try withinAngle("ll_to_earth(\(latitude), \(longitude))", radians: radians, geo: geo)
        return "(\(box) AND \(distance) AND \(fieldGuard))"
    }

    /// `$geoWithin: {"$polygon": [GeoPoint or [longitude, latitude], …]}` (or a Polygon object's
    /// `coordinates`, read as the Postgres adapter reads them): the GeoPoint lies in the polygon,
    /// boundary included, `point(longitude, latitude) <@ polygon` as Parse Server's Postgres adapter
    /// (planar, in degrees; no index).
    private mutating func withinPolygon(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let (_, fieldGuard) = try geoField(target, "$polygon", field: field)
        let points: [JSONValue]
        switch operand {
        case .array(let items):
            points = items
        case .object(let polygon) where polygon["__type"]?.string == "Polygon":
            guard case .array(let coordinates)? = polygon["coordinates"], coordinates.count >= 3 else {
                throw .invalidQuery("bad $geoWithin value; Polygon.coordinates should contain at least 3 lon/lat pairs")
            }
            points = coordinates
        default:
            throw .invalidQuery("bad $geoWithin value; $polygon should be Polygon object or Array of Parse.GeoPoint's")
        }
        guard points.count >= 3 else { throw .invalidQuery("bad $geoWithin value; $polygon should contain at least 3 GeoPoints") }
        guard points.count <= QueryCompiler.maxListCount else {
            throw .invalidQuery("$polygon on \(field) has more than \(QueryCompiler.maxListCount) points")
        }
        var vertices: [String] = []
        for point in points {
            let vertex = try GeoMath.pointOrPair(point, "$polygon on \(field)")
            vertices.append("(\(vertex.longitude),\(vertex.latitude))")
        }
        let polygon = try writer.bind(.text("(" + vertices.joined(separator: ",") + ")"), as: "polygon")
        guard case .custom(let path) = target else { throw .invalidQuery("$polygon needs a GeoPoint field; \(field) is not one") }
        let t = try expression(path)
        return "(\(fieldGuard) AND CASE WHEN jsonb_typeof(\(t) -> 'longitude') = 'number' AND jsonb_typeof(\(t) -> 'latitude') = 'number'"
            + " THEN point((\(t) ->> 'longitude')::float8, (\(t) ->> 'latitude')::float8) <@ \(polygon) ELSE false END)"
    }

    /// `$box`: `[southwest, northeast]`; `west > east` crosses the antimeridian. Index-backed by a
    /// bounding cube (`<@`, GiST), then exact on `latitude(geo)`/`longitude(geo)`.
    private mutating func withinBox(_ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        let (geo, fieldGuard) = try geoField(target, "$box", field: field)
        guard case .array(let corners) = operand, corners.count == 2 else {
            throw .invalidQuery("$box on \(field) expects [southwest GeoPoint, northeast GeoPoint]")
        }
        let southwest = try GeoMath.point(corners[0], "$box on \(field)")
        let northeast = try GeoMath.point(corners[1], "$box on \(field)")
        guard southwest.latitude <= northeast.latitude else {
            throw .invalidQuery("$box on \(field): the southwest corner is north of the northeast corner")
        }
        let cube = GeoMath.boundingCube(south: southwest.latitude, west: southwest.longitude,
                                        north: northeast.latitude, east: northeast.longitude)
        var low: [String] = []
        var high: [String] = []
        for axis in 0..<3 {
            low.append("\(try writer.bind(.double(cube.low[axis]), as: "float8")) * earth()")
            high.append("\(try writer.bind(.double(cube.high[axis]), as: "float8")) * earth()")
        }
        let south = try writer.bind(.double(southwest.latitude), as: "float8")
        let north = try writer.bind(.double(northeast.latitude), as: "float8")
        let west = try writer.bind(.double(southwest.longitude), as: "float8")
        let east = try writer.bind(.double(northeast.longitude), as: "float8")
        let longitude = southwest.longitude <= northeast.longitude
            ? "longitude(\(geo)) BETWEEN \(west) AND \(east)"
            : "(longitude(\(geo)) >= \(west) OR longitude(\(geo)) <= \(east))"
        return "(\(geo) <@ cube(ARRAY[\(low.joined(separator: ", "))], ARRAY[\(high.joined(separator: ", "))])"
            + " AND latitude(\(geo)) BETWEEN \(south) AND \(north) AND \(longitude) AND \(fieldGuard))"
    }
}
