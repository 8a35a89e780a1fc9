import ParleyJSON
import ParleyPostgres

/// Compiles a `ParseQuery` against a `TableLayout` into one parameterised SELECT (or COUNT).
///
/// Every value from the request is a parameter; field names are validated and reach the SQL only
/// as parameters (`data -> $3::text`) or as the layout's own column names. Rows come back with the
/// standard columns `object_id, created_at, updated_at, acl, data`, then the layout's `columns`
/// in order (see docs/queries.md).
public enum QueryCompiler {
    /// Most predicates in one query (102 beyond).
    public static let maxConditions = 256
    /// Most values in one `$in`/`$nin`/`$all` list, and most branches of one `$or`/`$and`.
    public static let maxListCount = 1000
    /// Deepest nesting of `$or`/`$and`.
    public static let maxNesting = 8
    /// Longest `$regex` pattern, in bytes.
    public static let maxRegexBytes = 1024

    /// The SELECT for the rows of a query. `readerIDs` nil means the master key (no ACL filter);
    /// otherwise the ids a row's ACL must grant read to (the user's id, later roles), to which
    /// the public `*` is always added.
    public static func compileSelect(_ query: ParseQuery, layout: TableLayout, readerIDs: [String]?) throws(QueryError) -> CompiledQuery {
        guard query.limit >= 0 else { throw .invalidQuery("limit must be a non-negative integer") }
        guard query.skip >= 0, query.skip <= ParseQuery.maxSkip else {
            throw .invalidQuery("skip must be between 0 and \(ParseQuery.maxSkip)")
        }
        let limit = min(query.limit, ParseQuery.maxLimit)
        var compiler = WhereCompiler(layout: layout, readerIDs: readerIDs, relationFields: query.relationFields, subqueryScopes: query.subqueryScopes)
        let (access, conditions) = try filter(query, layout: layout, readerIDs: readerIDs, compiler: &compiler)
        let orderBy = try ordering(query.order, compiler: &compiler)
        var score: String?
        if query.selectsTextScore {
            guard let rank = compiler.textRank else { throw .invalidQuery("keys=$score needs a $text constraint") }
            score = rank
        }
        let columns = try selectList(query.keys, layout: layout, writer: &compiler.writer, score: score)

        var sql = ""
        sql.reserveCapacity(columns.utf8.count + 400)
        if query.order.isEmpty, let near = compiler.nearSphere, let maxAngle = near.maxAngle, conditions == [near.predicate] {
            // "Nearest first within a radius" alone: take the skip + limit nearest rows by walking
            // the GiST index in distance order (a fixed amount of work, whatever the radius and
            // the table size), then keep those within the radius, which are a prefix of them.
            // The distance is the index's own (chord, `geo <-> centre`), computed once per row and
            // compared with the chord of the maximum angle, bound in place of the angle: the same
            // rows as `earth_distance(…) <= θ * earth()` without running earthdistance's SQL
            // functions per row and at planning (docs/performance.md, "Nearby tail latency").
            compiler.writer.rebind(maxAngle.parameter, to: .double(GeoMath.unitChord(radians: maxAngle.radians)))
            let inner = (access + [near.fieldGuard]).joined(separator: " AND ")
            sql += "SELECT \(columns) FROM (SELECT *, \(near.geo) <-> \(near.centerCube) AS nearest_distance FROM \(layout.table)"
                + " WHERE \(inner) ORDER BY nearest_distance LIMIT \(query.skip + limit))"
                + " AS nearest WHERE nearest_distance <= \(maxAngle.reference) * earth() ORDER BY nearest_distance"
        } else {
            sql += "SELECT "
            sql += columns
            sql += " FROM "
            sql += layout.table
            for (position, predicate) in access.enumerated() {
                sql += position == 0 ? " WHERE " : " AND "
                sql += predicate
            }
            for (position, predicate) in conditions.enumerated() {
                sql += position == 0 && access.isEmpty ? " WHERE " : " AND "
                sql += predicate
            }
            sql += " ORDER BY "
            sql += orderBy
        }
        // Appends rather than interpolation: this runs for every find.
        sql += " LIMIT "
        sql += String(limit)
        if query.skip > 0 {
            sql += " OFFSET "
            sql += String(query.skip)
        }
        return CompiledQuery(sql: sql, parameters: compiler.writer.parameters, usesRegex: compiler.usesRegex)
    }

    /// `SELECT count(*) AS count …` over the same rows, ignoring order, limit, skip and keys.
    public static func compileCount(_ query: ParseQuery, layout: TableLayout, readerIDs: [String]?) throws(QueryError) -> CompiledQuery {
        var compiler = WhereCompiler(layout: layout, readerIDs: readerIDs, relationFields: query.relationFields, subqueryScopes: query.subqueryScopes)
        let (access, conditions) = try filter(query, layout: layout, readerIDs: readerIDs, compiler: &compiler)
        let predicates = access + conditions
        var sql = "SELECT count(*) AS count FROM \(layout.table)"
        if !predicates.isEmpty { sql += " WHERE " + predicates.joined(separator: " AND ") }
        return CompiledQuery(sql: sql, parameters: compiler.writer.parameters, usesRegex: compiler.usesRegex)
    }

    /// The class filter and read access, then the `where` predicates.
    private static func filter(_ query: ParseQuery, layout: TableLayout, readerIDs: [String]?,
                               compiler: inout WhereCompiler) throws(QueryError) -> (access: [String], conditions: [String]) {
        let access = try accessPredicates(layout: layout, readerIDs: readerIDs, writer: &compiler.writer)
        switch query.where {
        case nil, .null?:
            return (access, [])
        case .object(let object)?:
            return (access, try compiler.compile(object))
        default:
            throw .invalidQuery("where must be a JSON object")
        }
    }

    /// The class filter and the read-access predicates of `layout` for `readerIDs`.
    static func accessPredicates(layout: TableLayout, readerIDs: [String]?, writer: inout SQLWriter) throws(QueryError) -> [String] {
        var access: [String] = []
        if let classColumn = layout.classColumn {
            access.append(classColumn + " = " + (try writer.bind(.text(layout.className), as: "text")))
        }
        if let readerIDs {
            switch layout.readAccess {
            case .permissions(let column):
                let readers = readerList(readerIDs)
                // `IS TRUE` keeps the GIN index out of the plan: a prepared statement's generic
                // plan guesses `rperm && $n` matches 1% of rows and bitmap-scans every public row.
                access.append("(" + column + " && " + (try writer.bind(.textArray(readers), as: "text[]")) + ") IS TRUE")
            case .owner(let column):
                access.append("\(column) = ANY(\(try writer.bind(.textArray(readerIDs.filter { $0 != "*" }), as: "text[]")))")
            }
        }
        return access
    }

    /// The ids a row's `rperm` must share one of: the public `*`, then `readerIDs` (no repeats).
    static func readerList(_ readerIDs: [String]) -> [String] {
        if readerIDs.isEmpty { return anonymousReaders }
        var readers = ["*"]
        for id in readerIDs where !readers.contains(id) { readers.append(id) }
        return readers
    }

    /// `readerList([])`, made once: every anonymous find uses it.
    private static let anonymousReaders = ["*"]

    /// `order`, else nearest first for `$nearSphere`; `object_id` breaks ties so paging with
    /// `skip` is stable.
    private static func ordering(_ keys: [ParseQuery.OrderKey], compiler: inout WhereCompiler) throws(QueryError) -> String {
        if keys.isEmpty, let near = compiler.nearSphere { return near.order }
        var terms: [String] = []
        var byObjectId = false
        for key in keys {
            if key.field == "$score" {
                guard let rank = compiler.textRank else { throw .invalidQuery("order by $score needs a $text constraint") }
                terms.append(rank + " DESC")
                continue
            }
            switch try compiler.resolve(key.field) {
            case .column(let column, _):
                if column == "object_id" { byObjectId = true }
                terms.append(key.descending ? "\(column) DESC" : column)
            case .custom(let path):
                let sql = try compiler.expression(path)
                // A missing field sorts as the smallest value, as in Parse on MongoDB.
                terms.append(key.descending ? "\(sql) DESC NULLS LAST" : "\(sql) NULLS FIRST")
            }
        }
        if !byObjectId { terms.append("object_id") }
        return terms.joined(separator: ", ")
    }

    /// The standard columns, then the layout's; with `keys`, `data` keeps only the listed keys.
    private static func selectList(_ keys: [String]?, layout: TableLayout, writer: inout SQLWriter, score: String? = nil) throws(QueryError) -> String {
        guard let keys, let data = layout.dataColumn else { return layout.selectList }
        for key in keys where !FieldPath.isValidName(key) { throw .invalidQuery("invalid key in keys: \(key)") }
        let custom = keys.filter { key in
            key != "objectId" && key != "createdAt" && key != "updatedAt" && layout.column(forField: key) == nil
        }
        var columns = ["object_id", "created_at", "updated_at"]
        columns.append(layout.aclColumn.map { $0 == "acl" ? $0 : "\($0) AS acl" } ?? "NULL::jsonb AS acl")
        if custom.isEmpty {
            columns.append("'{}'::jsonb AS data")
        } else {
            let names = try writer.bind(.textArray(custom), as: "text[]")
            let selected = "COALESCE((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(\(data)) AS e WHERE e.key = ANY(\(names))), '{}'::jsonb)"
            columns.append((score.map { "(\(selected) || jsonb_build_object('score', \($0)))" } ?? selected) + " AS data")
        }
        columns.append(contentsOf: layout.columns.map(\.column))
        return columns.joined(separator: ", ")
    }
}
