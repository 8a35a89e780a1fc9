import ParleyPostgres
import Synchronization

/// Per-class field types (`class_schemas`): recorded on a field's first write, then enforced.
///
/// A recorded type never changes, so known types are cached for the life of the process (valid
/// on every node). Checking a write costs no database round trip once its fields are known.
public final class SchemaStore: Sendable {
    private let cache = Mutex<[String: [String: ParseFieldType]]>([:])
    /// Every class's Relation fields, read in one statement and trusted for `relationFieldsTTL`
    /// (another node may add one): reads answer `{"__type":"Relation"}` for each.
    private let relations = Mutex<RelationSnapshot?>(nil)
    /// How long a node trusts its list of Relation fields.
    public static let relationFieldsTTL = Duration.seconds(10)
    /// Most Relation fields the list holds (a bound; more are not answered as Relation values).
    public static let maxRelationFields = 100_000

    private struct RelationSnapshot {
        var fields: [String: [RelationField]]
        var loadedAt: ContinuousClock.Instant
        var refreshing = false
    }

    /// A Relation field of a class.
    public struct RelationField: Sendable, Equatable {
        public let field: String
        public let targetClass: String
    }
    /// Fields Parley stores in typed columns, per system class: never recorded, always enforced.
    private let builtIn: [String: [String: ParseFieldType]]

    /// Most distinct classes cached (a bound against clients inventing class names).
    public static let maxCachedClasses = 10_000

    public init() {
        builtIn = [
            ClassName.user: ["username": .string, "email": .string, "emailVerified": .boolean, "password": .string],
            ClassName.installation: ["installationId": .string, "deviceType": .string, "deviceToken": .string, "voipDeviceToken": .string],
        ]
    }

    /// Records the types of new fields and checks the others; 111 on a mismatch. Returns the
    /// recorded types of `lookup` fields (those known).
    @discardableResult
    public func resolve(className: String, record: [(field: String, type: ParseFieldType)], lookup: [String] = [], on db: any SQLExecutor) async throws(ParseError) -> [String: ParseFieldType] {
        var known = cache.withLock { $0[className] ?? [:] }
        if let fixed = builtIn[className] { known.merge(fixed) { a, _ in a } }
        var missing: [(String, ParseFieldType)] = []
        var seen = Set<String>()
        for (field, type) in record where seen.insert(field).inserted {
            if let existing = known[field] {
                try Self.check(className, field, expected: existing, got: type)
            } else {
                missing.append((field, type))
            }
        }
        let missingLookups = lookup.filter { known[$0] == nil && !seen.contains($0) }
        if !missing.isEmpty || !missingLookups.isEmpty {
            let loaded = try await store(className: className, fields: missing, lookup: missingLookups, on: db)
            for (field, type) in missing {
                guard let stored = loaded[field] else {
                    if type == .geoPoint { throw .incorrectType("there can only be one GeoPoint field in a class") }
                    throw .internalError("schema row for \(className).\(field) missing after insert")
                }
                try Self.check(className, field, expected: stored, got: type)
            }
            known.merge(loaded) { _, b in b }
            if missing.contains(where: { if case .relation = $0.1 { true } else { false } }) {
                relations.withLock { $0 = nil }
            }
            // Inside a transaction the rows may still roll back: cache only committed knowledge.
            if !(db is PostgresTransaction) {
                cache.withLock { classes in
                if classes[className] == nil && classes.count >= Self.maxCachedClasses { classes.removeAll() }
                classes[className, default: [:]].merge(loaded) { _, b in b }
                }
            }
        }
        var result: [String: ParseFieldType] = [:]
        for field in lookup { if let type = known[field] { result[field] = type } }
        return result
    }

    /// The class's Relation fields as this node last read them (nil before the first read), and
    /// whether that read is older than `relationFieldsTTL`.
    public func knownRelationFields(className: String) -> (fields: [RelationField], stale: Bool)? {
        relations.withLock { snapshot in
            snapshot.map { ($0.fields[className] ?? [], ContinuousClock.now - $0.loadedAt >= Self.relationFieldsTTL) }
        }
    }

    /// The class's Relation fields, from memory while fresh, else read again (every class's, in
    /// one statement).
    public func relationFields(className: String, on db: any SQLExecutor) async throws(ParseError) -> [RelationField] {
        if let known = knownRelationFields(className: className), !known.stale { return known.fields }
        return try await loadRelationFields(on: db)[className] ?? []
    }

    /// Reads the list again in a task unless a read is under way (for callers that cannot wait).
    public func refreshRelationFields(on database: PostgresClient) {
        let start = relations.withLock { snapshot -> Bool in
            if snapshot?.refreshing == true { return false }
            snapshot?.refreshing = true
            return true
        }
        guard start else { return }
        Task { [self] in
            _ = try? await loadRelationFields(on: database)
            relations.withLock { $0?.refreshing = false }
        }
    }

    private func loadRelationFields(on db: any SQLExecutor) async throws(ParseError) -> [String: [RelationField]] {
        let rows = try await db.run("SELECT class_name, field, target_class FROM class_schemas WHERE type = 'Relation' ORDER BY class_name, field LIMIT $1",
                                    [.int(Self.maxRelationFields)], readOnly: true)
        var fields: [String: [RelationField]] = [:]
        for row in rows {
            guard let className = row["class_name"].string, let field = row["field"].string else { continue }
            fields[className, default: []].append(RelationField(field: field, targetClass: row["target_class"].string ?? ""))
        }
        if !(db is PostgresTransaction) {
            relations.withLock { $0 = RelationSnapshot(fields: fields, loadedAt: ContinuousClock.now) }
        }
        return fields
    }

    /// The class's GeoPoint field, if it has one.
    public func geoField(className: String, on db: any SQLExecutor) async throws(ParseError) -> String? {
        if let cached = cache.withLock({ $0[className]?.first(where: { $0.value == .geoPoint })?.key }) { return cached }
        let rows = try await db.run("SELECT field FROM class_schemas WHERE class_name = $1 AND type = 'GeoPoint' LIMIT 1", [.text(className)])
        guard let field = rows.first?["field"].string else { return nil }
        cache.withLock { $0[className, default: [:]][field] = .geoPoint }
        return field
    }

    /// Every recorded field of a class.
    public func fields(className: String, on db: any SQLExecutor) async throws(ParseError) -> [String: ParseFieldType] {
        let rows = try await db.run("SELECT field, type, target_class FROM class_schemas WHERE class_name = $1", [.text(className)])
        var fields = builtIn[className] ?? [:]
        for row in rows {
            if let field = row["field"].string, let name = row["type"].string, let type = ParseFieldType(name: name, targetClass: row["target_class"].string) {
                fields[field] = type
            }
        }
        return fields
    }

    /// Forgets cached types (tests; after a class is dropped by hand).
    public func reset() {
        cache.withLock { $0.removeAll() }
        relations.withLock { $0 = nil }
    }

    private func store(className: String, fields: [(String, ParseFieldType)], lookup: [String], on db: any SQLExecutor) async throws(ParseError) -> [String: ParseFieldType] {
        let names = fields.map(\.0), types = fields.map(\.1.name), targets = fields.map { $0.1.targetClass ?? "" }
        let all = names + lookup
        let sql = """
            WITH input AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS u(field, type, target_class)),
            inserted AS (
                INSERT INTO class_schemas (class_name, field, type, target_class)
                SELECT $1, field, type, NULLIF(target_class, '') FROM input
                ON CONFLICT DO NOTHING
                RETURNING field, type, target_class
            )
            SELECT field, type, target_class FROM inserted
            UNION ALL
            SELECT field, type, target_class FROM class_schemas WHERE class_name = $1 AND field = ANY($5::text[])
            """
        var rows = try await db.run(sql, [.text(className), .textArray(names), .textArray(types), .textArray(targets), .textArray(all)])
        var result = Self.decode(rows)
        // A field inserted concurrently by another transaction is invisible to this statement's
        // snapshot: read once more.
        if names.contains(where: { result[$0] == nil }) {
            rows = try await db.run("SELECT field, type, target_class FROM class_schemas WHERE class_name = $1 AND field = ANY($2::text[])", [.text(className), .textArray(all)])
            result.merge(Self.decode(rows)) { a, _ in a }
        }
        return result
    }

    private static func decode(_ rows: PostgresRows) -> [String: ParseFieldType] {
        var result: [String: ParseFieldType] = [:]
        for row in rows {
            if let field = row["field"].string, let name = row["type"].string, let type = ParseFieldType(name: name, targetClass: row["target_class"].string) {
                result[field] = type
            }
        }
        return result
    }

    private static func check(_ className: String, _ field: String, expected: ParseFieldType, got: ParseFieldType) throws(ParseError) {
        guard expected == got else {
            throw .incorrectType("schema mismatch for \(className).\(field); expected \(expected) but got \(got)")
        }
    }
}
