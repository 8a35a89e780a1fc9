import ParleyJSON
import ParleyPostgres

/// Shapes a read's objects as its `ReadShape` asks (Parse Server's `RestQuery.handleInclude`,
/// `includePath`, `replacePointers`): excluded keys taken out, then each include path in turn,
/// shortest first, its pointers replaced by the objects they point to.
///
/// Targets are read by `fetchTargets` only, through the reader's normal authorized find
/// (`QueryRunner.rows`, the ACL filter with the reader's roles): one statement per include path
/// and target class per 1000 distinct targets, never one per row. A pointer whose target the
/// reader cannot read (or that is gone) is left out, as Parse Server leaves it out: the member
/// disappears, or the element of an array of pointers. `_User` targets are written by `RowJSON`
/// as every user read writes them (no password, auth data or session token; `email` only for the
/// user itself or the master key).
struct IncludeResolver {
    /// Most targets one statement reads.
    static let targetsPerStatement = 1000
    /// Most classes one include path reads targets of (an array may mix classes); pointers to
    /// classes beyond it are left as pointers.
    static let maxClassesPerPath = 16
    /// Members never excluded (Parse Server's `AlwaysSelectedKeys`).
    static let alwaysSelected: Set<String> = ["objectId", "createdAt", "updatedAt", "ACL"]

    let runner: QueryRunner
    let shape: ReadShape
    let auth: Auth

    /// Applies the shape to `results`, objects of `className`.
    func apply(_ results: inout [JSONObject], on db: any SQLExecutor) async throws(ParseError) {
        let excluded = shape.excludedKeys(under: []).filter { !Self.alwaysSelected.contains($0) }
        if !excluded.isEmpty {
            for index in results.indices {
                for key in excluded { results[index][key] = nil }
            }
        }
        var paths = shape.include
        if shape.includeAll {
            for key in Self.pointerFields(results) where !paths.contains([key]) { paths.append([key]) }
            paths.sort { $0.count < $1.count }
        }
        for path in paths {
            var wanted: [String: [String]] = [:]
            var classes: [String] = []
            var seen = Set<String>()
            for result in results {
                Self.collect(.object(result), path[...], classes: &classes, wanted: &wanted, seen: &seen)
            }
            if wanted.isEmpty { continue }
            var found: [String: JSONValue] = [:]
            for className in classes.prefix(Self.maxClassesPerPath) {
                let ids = wanted[className] ?? []
                var start = 0
                while start < ids.count {
                    let chunk = Array(ids[start..<min(start + Self.targetsPerStatement, ids.count)])
                    for (id, object) in try await fetchTargets(className: className, ids: chunk, path: path, on: db) {
                        found[Self.key(className, id)] = object
                    }
                    start += Self.targetsPerStatement
                }
            }
            let skipped = Set(classes.dropFirst(Self.maxClassesPerPath))
            for index in results.indices {
                if case .object(let replaced)? = Self.replacing(.object(results[index]), path[...], found: found, keeping: skipped) {
                    results[index] = replaced
                }
            }
        }
    }

    /// The objects `ids` of `className` the reader may read, as included objects
    /// (`"__type":"Object"`, `className`), reduced by the shape's keys under `path` and by the
    /// class's permissions. The one read of include targets.
    func fetchTargets(className: String, ids: [String], path: [String], on db: any SQLExecutor) async throws(ParseError) -> [(String, JSONValue)] {
        let idList = JSONValue.array(ids.map { .string($0) })
        var query = ParseQuery(className: className, where: ["objectId": ["$in": idList]], limit: ids.count, keys: shape.keys(under: path))
        // The target class's permissions, as Parse Server runs the include as a `get` on it: a
        // refusal fails the request (119), pointer permissions narrow the targets, protected
        // fields are hidden.
        var hidden: [String] = []
        var userFields: [ClassAccess.UserFieldProtection] = []
        let keys = query.keys
        if !auth.isMaster, let schemas = runner.schemas, let info = try await schemas.classInfo(of: className, on: db), !info.isOpen {
            let access = try info.permissions.access(.get, className: className, auth: auth)
            hidden = access.protectedFields
            userFields = access.userFieldProtections
            guard let constrained = QueryRunner.constrained(query, auth: auth, access: access) else { return [] }
            query = constrained
        }
        guard let rows = try await runner.rows(query, auth: auth, on: db) else { return [] }
        let excluded = shape.excludedKeys(under: path).filter { !Self.alwaysSelected.contains($0) }
        var targets: [(String, JSONValue)] = []
        let relations = try await runner.relationFields(className, on: db)
        for var object in Self.objects(RowJSON.Kind(className: className), rows, viewer: auth, keys: keys, relations: relations, hidden: hidden, userFields: userFields) {
            guard let id = object["objectId"]?.string else { continue }
            for key in excluded { object[key] = nil }
            if className == ClassName.user && !auth.isMaster {
                object["sessionToken"] = nil
                object["authData"] = nil
            }
            object["__type"] = "Object"
            object["className"] = .string(className)
            targets.append((id, .object(object)))
        }
        return targets
    }

    /// Rows as JSON objects, written by `RowJSON` for `viewer`.
    static func objects(_ kind: RowJSON.Kind, _ rows: PostgresRows?, range: Range<Int>? = nil, viewer: Auth, keys: [String]?,
                        relations: [SchemaStore.RelationField] = [], hidden: [String] = [], userFields: [ClassAccess.UserFieldProtection] = []) -> [JSONObject] {
        guard let rows, !rows.isEmpty else { return [] }
        let writer = RowJSON(kind, columns: rows.columns, viewer: viewer, keys: keys, relations: relations, hidden: hidden, userFields: userFields)
        let range = range ?? rows.indices
        var objects: [JSONObject] = []
        objects.reserveCapacity(range.count)
        var bytes: [UInt8] = []
        for index in range {
            bytes.removeAll(keepingCapacity: true)
            writer.write(rows[index], into: &bytes)
            if case .object(let object)? = try? JSONParser().parse(bytes) { objects.append(object) }
        }
        return objects
    }

    /// `{"results":[…]}` (plus `"count"`).
    static func body(_ results: [JSONObject], count: Int?) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + results.count * 768)
        bytes.append(contentsOf: #"{"results":["#.utf8)
        for (position, result) in results.enumerated() {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.object(result).serialize(into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
        if let count {
            bytes.append(contentsOf: #","count":"#.utf8)
            JSONValue.int(Int64(count)).serialize(into: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Top-level members holding a pointer or an array, the fields `include=*` includes.
    private static func pointerFields(_ results: [JSONObject]) -> [String] {
        var fields: [String] = []
        for result in results {
            for (key, value) in result where !fields.contains(key) {
                switch value {
                case .array: fields.append(key)
                case .object(let object) where isPointer(object): fields.append(key)
                default: break
                }
            }
        }
        return fields
    }

    private static func isPointer(_ object: JSONObject) -> Bool {
        object["__type"]?.string == "Pointer" && object["className"]?.string != nil && object["objectId"]?.string != nil
    }

    private static func key(_ className: String, _ objectId: String) -> String {
        className + "\u{0}" + objectId
    }

    /// The pointers at `path` in `value`, looking through arrays at every level (Parse's
    /// `findPointers`), grouped by class in first-seen order.
    private static func collect(_ value: JSONValue, _ path: ArraySlice<String>, classes: inout [String], wanted: inout [String: [String]], seen: inout Set<String>) {
        switch value {
        case .array(let items):
            for item in items { collect(item, path, classes: &classes, wanted: &wanted, seen: &seen) }
        case .object(let object):
            guard let first = path.first else {
                guard isPointer(object), let className = object["className"]?.string, let id = object["objectId"]?.string,
                      seen.insert(key(className, id)).inserted else { return }
                if wanted[className] == nil { classes.append(className) }
                wanted[className, default: []].append(id)
                return
            }
            if let member = object[first] { collect(member, path.dropFirst(), classes: &classes, wanted: &wanted, seen: &seen) }
        default:
            return
        }
    }

    /// `value` with the pointers at `path` replaced by their objects in `found`; nil for a
    /// pointer not found (left out by the caller), except pointers to a class in `keeping`.
    private static func replacing(_ value: JSONValue, _ path: ArraySlice<String>, found: [String: JSONValue], keeping: Set<String>) -> JSONValue? {
        switch value {
        case .array(let items):
            return .array(items.compactMap { replacing($0, path, found: found, keeping: keeping) })
        case .object(var object):
            guard let first = path.first else {
                guard isPointer(object), let className = object["className"]?.string, let id = object["objectId"]?.string else { return value }
                if keeping.contains(className) { return value }
                return found[key(className, id)]
            }
            guard let member = object[first] else { return value }
            object[first] = replacing(member, path.dropFirst(), found: found, keeping: keeping)
            return .object(object)
        default:
            return value
        }
    }
}
