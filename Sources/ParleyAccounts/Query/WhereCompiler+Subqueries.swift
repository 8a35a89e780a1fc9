import ParleyJSON
import ParleyPostgres

/// `$inQuery`, `$notInQuery`, `$select`, `$dontSelect`: subqueries compiled into the statement.
extension WhereCompiler {
    // MARK: - Subqueries

    /// `SELECT <value> FROM <table> WHERE <class, ACL, scope, where>` for a subquery on
    /// `className`: the viewer's own read of that class, compiled into this statement with the
    /// same parameters. `value` gives the selected expression for the inner compiler. Nil when the
    /// viewer may read no row of the class.
    private mutating func subquery(_ key: String, className: String, where inner: JSONValue?,
                                   value: (inout WhereCompiler) throws(QueryError) -> String) throws(QueryError) -> String? {
        guard ClassName.isValid(className) || ClassName.isSystem(className) else {
            throw .invalidQuery("\(key): invalid class name \(className)")
        }
        guard subqueryDepth < SubqueryScope.maxDepth else {
            throw .invalidQuery("\(key) nested deeper than \(SubqueryScope.maxDepth) subqueries")
        }
        let scope: SubqueryScope
        if isMaster {
            scope = .open
        } else {
            guard let known = subqueryScopes[className] else { throw .invalidQuery("\(key) on \(className) is not supported here") }
            scope = known
        }
        if scope.rows == .none { return nil }
        let innerLayout = TableLayout.forClass(className)
        var compiler = WhereCompiler(layout: innerLayout, readerIDs: readerIDs, subqueryScopes: subqueryScopes, subqueryDepth: subqueryDepth + 1)
        compiler.writer = writer
        compiler.conditions = conditions
        var predicates = try QueryCompiler.accessPredicates(layout: innerLayout, readerIDs: readerIDs, writer: &compiler.writer)
        switch inner {
        case nil, .null?: break
        case .object(let object)?:
            for field in object.keys where scope.protectedFields.contains(field) {
                throw .operationForbidden("This user is not allowed to query \(field) on class \(className)")
            }
            predicates.append(contentsOf: try compiler.compile(object))
        default: throw .invalidQuery("improper usage of \(key): where must be a JSON object")
        }
        if case .matching(.object(let constraint)) = scope.rows { predicates.append(contentsOf: try compiler.compile(constraint)) }
        let selected = try value(&compiler)
        writer = compiler.writer
        conditions = compiler.conditions
        usesRegex = usesRegex || compiler.usesRegex
        var sql = "SELECT " + selected + " FROM " + innerLayout.table
        if !predicates.isEmpty { sql += " WHERE " + predicates.joined(separator: " AND ") }
        return sql
    }

    /// `$inQuery: {"className": C, "where": W}`: a Pointer field (or an array holding one)
    /// pointing to an object of C that the viewer's find `W` on C returns (Parse Server's
    /// `replaceInQuery`, without its round trip: one statement, no cap on the subquery's rows).
    mutating func inQuery(_ key: String, _ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        guard case .object(let object) = operand, let className = object["className"]?.string, let inner = object["where"] else {
            throw .invalidQuery("improper usage of \(key) on \(field)")
        }
        guard let ids = try subquery(key, className: className, where: inner, value: { _ throws(QueryError) in "object_id" }) else { return "FALSE" }
        switch target {
        case .column(let column, .pointer(let targetClass)):
            return targetClass == className ? "\(column) IN (\(ids))" : "FALSE"
        case .column:
            return "FALSE"
        case .custom(let path):
            let t = try expression(path)
            let name = try writer.bind(.text(className), as: "text")
            return "((\(t) ->> 'className') = \(name) AND (\(t) ->> 'objectId') IN (\(ids))"
                + " OR (jsonb_typeof(\(t)) = 'array' AND EXISTS (SELECT 1 FROM jsonb_array_elements(\(t)) AS p(v)"
                + " WHERE (p.v ->> 'className') = \(name) AND (p.v ->> 'objectId') IN (\(ids)))))"
        }
    }

    /// `$select: {"query": {"className": C, "where": W}, "key": k}`: the field equals (or, an
    /// array, holds) the value of `k` of some object the viewer's find `W` on C returns (Parse
    /// Server's `replaceSelect` as an `$in` of those values).
    mutating func select(_ key: String, _ operand: JSONValue, on target: FieldTarget, field: String) throws(QueryError) -> String {
        guard case .object(let object) = operand, object.count == 2, case .object(let query)? = object["query"],
              let className = query["className"]?.string, let selectedKey = object["key"]?.string, !selectedKey.isEmpty else {
            throw .invalidQuery("improper usage of \(key) on \(field)")
        }
        let head = String(selectedKey.split(separator: ".", maxSplits: 1).first ?? "")
        if !isMaster, subqueryScopes[className]?.protectedFields.contains(head) == true {
            throw .operationForbidden("This user is not allowed to select \(head) of class \(className)")
        }
        guard let values = try subquery(key, className: className, where: query["where"], value: { (inner: inout WhereCompiler) throws(QueryError) in
            try inner.jsonValue(of: selectedKey, key: key)
        }) else { return "FALSE" }
        let selected = "(SELECT s.v FROM (\(values)) AS s(v) WHERE s.v IS NOT NULL AND s.v <> 'null')"
        switch target {
        case .column(let column, .pointer(let targetClass)):
            let name = try writer.bind(.text(targetClass), as: "text")
            return "\(column) IN (SELECT s.v ->> 'objectId' FROM \(selected) AS s(v) WHERE (s.v ->> 'className') = \(name))"
        case .column(let column, .date):
            return "\(column) IN (SELECT (s.v #>> '{}')::timestamptz FROM \(selected) AS s(v) WHERE jsonb_typeof(s.v) = 'string')"
        case .column(let column, _):
            return "to_jsonb(\(column)) IN \(selected)"
        case .custom(let path):
            let t = try expression(path)
            return "EXISTS (SELECT 1 FROM \(selected) AS s(v) WHERE \(t) @> s.v OR \(t) @> jsonb_build_array(s.v))"
        }
    }

    /// The jsonb value of `field` as a read returns it (`$select`'s key): a custom field or path,
    /// `objectId`, an ISO date string for `createdAt`/`updatedAt`, a Pointer for a pointer column.
    mutating func jsonValue(of field: String, key: String) throws(QueryError) -> String {
        switch try resolve(field) {
        case .custom(let path):
            return try expression(path)
        case .column(let column, .date):
            return "to_jsonb(to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))"
        case .column(let column, .pointer(let targetClass)):
            let name = try writer.bind(.text(targetClass), as: "text")
            return "CASE WHEN \(column) IS NULL THEN NULL ELSE jsonb_build_object('__type', 'Pointer', 'className', \(name), 'objectId', \(column)) END"
        case .column(let column, _):
            return "to_jsonb(\(column))"
        }
    }
}
