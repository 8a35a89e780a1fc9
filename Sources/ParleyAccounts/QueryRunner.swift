import ParleyJSON
import ParleyPostgres
import Synchronization

/// Runs Parse queries (`GET /classes/:name`, `GET /users`, `GET /installations`) through the
/// query compiler and writes the rows as the response body (`RowJSON`) for the caller.
public struct QueryRunner: Sendable {
    /// SELECTs of the query shapes seen, so repeated shapes skip the compiler.
    public let compiledQueries: CompiledQueryCache
    /// The bounds of `$regex` statements.
    public let regexLimit: RegexStatementLimit
    /// Field types, to tell Relation fields in `where` (nil: no field is taken for a Relation).
    public let schemas: SchemaStore?
    /// Classes whose finds answered more than one chunk: their finds read through a cursor.
    let largeAnswers = LargeAnswerClasses()

    public init(compiledQueries: CompiledQueryCache = CompiledQueryCache(), regexLimit: RegexStatementLimit = RegexStatementLimit(),
                schemas: SchemaStore? = nil) {
        self.compiledQueries = compiledQueries
        self.regexLimit = regexLimit
        self.schemas = schemas
    }

    /// The response body of `query` for `auth`, whole (`findAnswer` collected).
    public func find(_ query: ParseQuery, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        try await findAnswer(query, auth: auth, access: access, on: db).collect()
    }

    /// The answer of `query` for `auth`: `{"results":[…]}` (plus `"count"`), the rows written by
    /// `RowJSON`. `access` (class-level permissions) narrows the rows to those its pointer fields
    /// grant and hides its protected fields. With includes, dotted `keys` or `excludeKeys` the
    /// rows are shaped by `IncludeResolver`.
    ///
    /// A find that may answer many bytes (`limit` over `bufferedRowLimit`, or a class whose
    /// answers were large) reads its rows through a cursor, a page at a time as the answer is
    /// taken (`FindPages`); others read every row in one statement, and an answer over one chunk
    /// is still written a chunk at a time. In a transaction (a batch) and with `$regex` the rows
    /// are read in one statement.
    public func findAnswer(_ query: ParseQuery, auth: Auth, access: ClassAccess = .unrestricted, on db: any SQLExecutor) async throws(ParseError) -> FindAnswer {
        try Self.refuseProtectedConstraints(query, access: access)
        let output = RowOutput(query, auth: auth, access: access)
        // The rows are written with the keys asked for (`constrained` may add some to the SELECT).
        let keys = query.keys
        guard var query = Self.constrained(query, auth: auth, access: access) else { return .bytes(output.body(nil, count: query.count ? 0 : nil)) }
        let pointerFields = Self.pointerFields(query)
        if let schemas, !pointerFields.isEmpty, query.className != ClassName.session {
            let types = try await schemas.resolve(className: query.className, record: [], lookup: pointerFields, on: db)
            query.relationFields = Set(pointerFields.filter { if case .relation? = types[$0] { true } else { false } })
        }
        query.subqueryScopes = try await subqueryScopes(query, auth: auth, on: db)
        let relations = try await relationFields(query.className, on: db)
        var count: Int?
        if query.count {
            let compiled = try Self.compile { () throws(QueryError) in
                try QueryCompiler.compileCount(query, layout: TableLayout.forClass(query.className), readerIDs: Self.readers(auth))
            }
            count = try await run(compiled, on: db).first?["count"].int ?? 0
        }
        let pages = FindPages.Output(
            kind: RowJSON.Kind(className: query.className), viewer: auth, keys: keys, relations: relations, hidden: access.protectedFields,
            userFields: access.userFieldProtections, shaper: query.shape.isPlain ? nil : IncludeResolver(runner: self, shape: query.shape, auth: auth), db: db)
        guard let compiled = try select(query, auth: auth) else { return try await FindPages.answer(rows: nil, count: count, output: pages) }
        if !compiled.usesRegex, let client = db as? PostgresClient, streams(query) {
            let first = min(query.limit, FindPages.firstPageRows)
            let (cursor, rows): (PostgresCursor, PostgresRows)
            do {
                (cursor, rows) = try await client.cursor(compiled.sql, compiled.parameters, first: first)
            } catch {
                throw Self.readError(error)
            }
            return try await FindPages.answer(cursor: cursor, first: rows, firstRows: first, count: count, output: pages)
        }
        let answer = try await FindPages.answer(rows: try await run(compiled, on: db), count: count, output: pages)
        if case .pages = answer { largeAnswers.record(query.className) }
        return answer
    }

    /// Finds with a `limit` up to this read their rows in one statement (unless their class had
    /// large answers); above it, through a cursor. Parse's default `limit`.
    public static let bufferedRowLimit = 100

    /// Whether `query` reads its rows through a cursor.
    func streams(_ query: ParseQuery) -> Bool {
        query.limit > Self.bufferedRowLimit || (query.limit > 1 && largeAnswers.contains(query.className))
    }

    /// The response body of an aggregate (`GET /aggregate/:className`, master key):
    /// `{"results":[…]}`, each result a document of the last stage (or a distinct value).
    public func aggregate(_ query: AggregateQuery, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        if TableLayout.forClass(query.className).table == "objects" { try ObjectStore.validate(className: query.className) }
        let compiled = try Self.compile { () throws(QueryError) in try AggregateCompiler.compile(query) }
        let rows = try await run(compiled, on: db)
        guard rows.count <= AggregateCompiler.maxRows else {
            throw ParseError.invalidQuery("the aggregate returns more than \(AggregateCompiler.maxRows) results: add a $limit")
        }
        var bytes: [UInt8] = []
        bytes.append(contentsOf: #"{"results":["#.utf8)
        for (position, row) in rows.enumerated() {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: (row["doc"].text ?? "null").utf8)
        }
        bytes.append(contentsOf: "]}".utf8)
        return bytes
    }

    /// 119 for a `where` constraining a field `access` hides from the viewer (Parse Server's
    /// `denyProtectedFields`; also inside `$or`, `$and`, `$nor`), which would reveal its values.
    static func refuseProtectedConstraints(_ query: ParseQuery, access: ClassAccess) throws(ParseError) {
        guard !access.protectedFields.isEmpty, case .object(let object)? = query.where else { return }
        func check(_ object: JSONObject, depth: Int) throws(ParseError) {
            for (key, value) in object {
                if access.protectedFields.contains(String(key.split(separator: ".", maxSplits: 1).first ?? "")) {
                    throw .operationForbidden("This user is not allowed to query \(key) on class \(query.className)")
                }
                guard depth < QueryCompiler.maxNesting, key == "$or" || key == "$and" || key == "$nor", case .array(let branches) = value else { continue }
                for case .object(let branch) in branches { try check(branch, depth: depth + 1) }
            }
        }
        try check(object, depth: 0)
    }

    /// `query` with `access`'s pointer permissions added to its `where`; nil when they match
    /// nothing (no session). `keys` gains the fields `userField:` protections read (the caller
    /// writes the rows with the keys asked for).
    static func constrained(_ query: ParseQuery, auth: Auth, access: ClassAccess) -> ParseQuery? {
        var query = query
        if let keys = query.keys {
            for entry in access.userFieldProtections where !keys.contains(entry.field) { query.keys?.append(entry.field) }
        }
        guard !access.pointerFields.isEmpty else { return query }
        guard let userId = auth.userId, let constraint = ACLSQL.pointerConstraint(access.pointerFields, userId: userId) else { return nil }
        var constrained = query
        constrained.where = query.where.map { ["$and": [$0, constraint]] } ?? constraint
        return constrained
    }
    /// One object's JSON (a single-object GET, `/users/me`) shaped by `shape`: top-level `keys`
    /// (`sessionToken` kept), `excludeKeys` and includes, exactly as a find shapes its rows.
    public func shape(_ object: [UInt8], shape: ReadShape, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> [UInt8] {
        if shape.isPlain && shape.keys == nil { return object }
        guard case .object(var value)? = try? JSONParser().parse(object) else { return object }
        if let keys = shape.topLevelKeys {
            let kept = Set(keys).union(IncludeResolver.alwaysSelected).union(["sessionToken"])
            for key in value.keys where !kept.contains(key) { value[key] = nil }
        }
        var results = [value]
        try await IncludeResolver(runner: self, shape: shape, auth: auth).apply(&results, on: db)
        var bytes: [UInt8] = []
        JSONValue.object(results[0]).serialize(into: &bytes)
        return bytes
    }

    /// The Relation fields a class's objects answer (none for sessions or without a schema).
    func relationFields(_ className: String, on db: any SQLExecutor) async throws(ParseError) -> [SchemaStore.RelationField] {
        guard let schemas, RowJSON.Kind(className: className) != .session else { return [] }
        return try await schemas.relationFields(className: className, on: db)
    }

    /// The rows of `query` that `auth` may read (nil when `limit` is 0): the normal authorized
    /// read, which include targets go through too.
    func rows(_ query: ParseQuery, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> PostgresRows? {
        guard let compiled = try select(query, auth: auth) else { return nil }
        return try await run(compiled, on: db)
    }

    /// `find` without a task, for a query without `count` and a caller on an event loop thread
    /// (an inline HTTP answer): the same statement and the same writer, through one read of
    /// `database`; `completion` runs on that loop, once. Declines (false, `completion` not
    /// called) a `$regex` query, which runs in a transaction of its own on the async path, and a
    /// query with includes, dotted `keys` or `excludeKeys` (more statements after the first).
    public func find(_ query: ParseQuery, auth: Auth, access: ClassAccess = .unrestricted, on database: PostgresClient,
                     completion: @escaping (Result<FindAnswer, ParseError>) -> Void) -> Bool {
        precondition(!query.count, "a counting find takes two statements: use the async find")
        if !query.shape.isPlain || !Self.pointerFields(query).isEmpty || !access.pointerFields.isEmpty || !access.userFieldProtections.isEmpty
            || !SubqueryScope.classes(in: query.where, limit: 1).isEmpty || streams(query) { return false }
        // The Relation fields as this node last read them; an old or missing list is read again
        // in the background (a Relation field another node added shows within seconds).
        var relations: [SchemaStore.RelationField] = []
        if let schemas, RowJSON.Kind(className: query.className) != .session {
            let known = schemas.knownRelationFields(className: query.className)
            relations = known?.fields ?? []
            if known?.stale ?? true { schemas.refreshRelationFields(on: database) }
        }
        let compiled: CompiledQuery?
        do {
            try Self.refuseProtectedConstraints(query, access: access)
            compiled = try select(query, auth: auth)
        } catch {
            completion(.failure(error))
            return true
        }
        // The completion keeps what writing the rows needs, not the whole query.
        let output = RowOutput(query, auth: auth, access: access, relations: relations)
        guard let compiled else {
            completion(.success(.bytes(output.body(nil, count: nil))))
            return true
        }
        if compiled.usesRegex { return false }
        let pages = FindPages.Output(kind: output.kind, viewer: auth, keys: query.keys, relations: relations, hidden: access.protectedFields,
                                     userFields: access.userFieldProtections, shaper: nil, db: database)
        let className = query.className, largeAnswers = largeAnswers
        database.read(compiled.sql, compiled.parameters) { result in
            switch result {
            case .success(let rows):
                let answer = FindPages.plainAnswer(rows: rows, count: nil, output: pages)
                if case .pages = answer { largeAnswers.record(className) }
                completion(.success(answer))
            case .failure(let error): completion(.failure(Self.readError(error)))
            }
        }
        return true
    }

    /// What `auth` may read of each class the subqueries of `query` read, as Parse Server runs
    /// each subquery as a `find`: its class-level permissions refuse (119, 101) or narrow it by
    /// pointer permissions; a class without a stored schema is open (it has no rows unless
    /// clients may create classes).
    func subqueryScopes(_ query: ParseQuery, auth: Auth, on db: any SQLExecutor) async throws(ParseError) -> [String: SubqueryScope] {
        guard !auth.isMaster else { return [:] }
        var scopes: [String: SubqueryScope] = [:]
        for className in SubqueryScope.classes(in: query.where) {
            guard ClassName.isValid(className) || ClassName.isSystem(className) else { continue }
            guard let schemas, let info = try await schemas.classInfo(of: className, on: db), !info.isOpen else {
                scopes[className] = .open
                continue
            }
            let access = try info.permissions.access(.find, className: className, auth: auth)
            var scope = SubqueryScope(protectedFields: access.protectedFields)
            if !access.pointerFields.isEmpty {
                if let userId = auth.userId, let constraint = ACLSQL.pointerConstraint(access.pointerFields, userId: userId) {
                    scope.rows = .matching(constraint)
                } else {
                    scope.rows = .none
                }
            }
            scopes[className] = scope
        }
        return scopes
    }

    /// The SELECT of the rows of `query` that `auth` may read, or nil when `limit` is 0.
    private func select(_ query: ParseQuery, auth: Auth) throws(ParseError) -> CompiledQuery? {
        let layout = TableLayout.forClass(query.className)
        if layout.table == "objects" { try ObjectStore.validate(className: query.className) }
        guard query.limit > 0 else { return nil }
        return try Self.compile { () throws(QueryError) in
            try compiledQueries.compileSelect(query, layout: layout, readerIDs: Self.readers(auth))
        }
    }

    /// Top-level `where` fields constrained to equal a Pointer: a Relation field's query form.
    private static func pointerFields(_ query: ParseQuery) -> [String] {
        guard case .object(let object)? = query.where else { return [] }
        var fields: [String] = []
        for (key, value) in object where !key.hasPrefix("$") {
            if case .object(let operand) = value, operand["__type"]?.string == "Pointer" { fields.append(key) }
        }
        return fields
    }

    /// The ACL readers a query filters on: nil for the master key (no filter).
    private static func readers(_ auth: Auth) -> [String]? {
        auth.isMaster ? nil : (auth.userId.map { auth.roles.isEmpty ? [$0] : [$0] + auth.roles } ?? [])
    }

    private static func compile(_ body: () throws(QueryError) -> CompiledQuery) throws(ParseError) -> CompiledQuery {
        do {
            return try body()
        } catch {
            throw ParseError(error)
        }
    }

    private func run(_ compiled: CompiledQuery, on db: any SQLExecutor) async throws(ParseError) -> PostgresRows {
        if compiled.usesRegex { return try await regexLimit.run(compiled, on: db) }
        do {
            return try await db.read(compiled.sql, compiled.parameters)
        } catch {
            throw Self.readError(error)
        }
    }

    /// A failed query as the Parse error the caller gets.
    private static func readError(_ error: PostgresError) -> ParseError {
        if let queryError = QueryError(databaseError: error) { return ParseError(queryError) }
        return ParseError.database(error)
    }
}

extension ParseError {
    /// The Parse error for a refused query.
    public init(_ error: QueryError) {
        switch error {
        case .invalidQuery(let message): self = .invalidQuery(message)
        case .invalidJSON(let message): self = .invalidJSON(message)
        case .operationForbidden(let message): self = .operationForbidden(message)
        }
    }
}

/// What turns a find's rows into its response body: the class, `keys` and the viewer.
private struct RowOutput {
    let kind: RowJSON.Kind
    let keys: [String]?
    let viewer: Auth
    let hidden: [String]
    let userFields: [ClassAccess.UserFieldProtection]
    let relations: [SchemaStore.RelationField]

    init(_ query: ParseQuery, keys: [String]?? = .none, auth: Auth, access: ClassAccess, relations: [SchemaStore.RelationField] = []) {
        kind = RowJSON.Kind(className: query.className)
        self.keys = keys ?? query.keys
        viewer = auth
        hidden = access.protectedFields
        userFields = access.userFieldProtections
        self.relations = relations
    }

    /// The response body for `rows` (nil when `limit` was 0) and `count`.
    func body(_ rows: PostgresRows?, count: Int?) -> [UInt8] {
        RowJSON.results(kind, rows, count: count, viewer: viewer, keys: keys, relations: relations, hidden: hidden, userFields: userFields)
    }
}

/// Classes whose answers were large, so that their finds take the cursor (bounded: past
/// `capacity` classes the set starts over).
final class LargeAnswerClasses: Sendable {
    static let capacity = 10_000
    private let classes = Mutex<Set<String>>([])
    /// Set at the first record: until then the hot path reads no lock.
    private let any = Atomic<Bool>(false)

    func record(_ className: String) {
        any.store(true, ordering: .relaxed)
        classes.withLock {
            if $0.count >= Self.capacity { $0.removeAll() }
            $0.insert(className)
        }
    }

    func contains(_ className: String) -> Bool {
        guard any.load(ordering: .relaxed) else { return false }
        return classes.withLock { $0.contains(className) }
    }
}
