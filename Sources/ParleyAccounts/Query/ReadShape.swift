/// What a read returns beyond its rows' stored members: the pointers to include (`include`,
/// `includeAll`, and the parents of dotted `keys`/`excludeKeys`), `keys` with dotted paths for
/// included objects, and `excludeKeys`, as Parse Server's `RestQuery` reads them.
public struct ReadShape: Sendable, Equatable {
    /// Most include paths after expansion (`a.b.c` counts `a`, `a.b`, `a.b.c`); 102 beyond.
    public static let maxIncludePaths = 64
    /// Most segments in one include path; 102 beyond.
    public static let maxIncludeDepth = 5
    /// Most entries in one `include`, `keys` or `excludeKeys` list; 102 beyond.
    public static let maxListEntries = 256

    /// Include paths with every prefix, deduplicated, shortest first (`foo` before `foo.bar`).
    public private(set) var include: [[String]] = []
    /// `include=*` or `includeAll`: every top-level pointer (or array of pointers) is included.
    public private(set) var includeAll = false
    /// `keys` as given (dotted paths reduce included objects); nil: every member.
    public private(set) var keys: [String]?
    /// `excludeKeys` as given (dotted paths reduce included objects).
    public private(set) var excludeKeys: [String] = []

    public init() {}

    /// A shape of top-level `keys` only (nil: every member).
    init(keys: [String]?) {
        self.keys = keys
    }

    /// Whether the rows are answered exactly as stored (no include, no dotted key, no exclusion).
    public var isPlain: Bool {
        include.isEmpty && !includeAll && excludeKeys.isEmpty && !(keys?.contains { $0.contains(".") } ?? false)
    }

    /// The top-level fields `keys` selects (each path's first segment), nil for every field.
    public var topLevelKeys: [String]? {
        guard let keys else { return nil }
        var result: [String] = []
        for key in keys {
            let first = key.split(separator: ".", maxSplits: 1).first.map(String.init) ?? key
            if !result.contains(first) { result.append(first) }
        }
        return result
    }

    /// Reads an `include` value: comma-separated paths (or a JSON array of them); `*` includes all.
    mutating func addInclude(_ entries: [String]) throws(QueryError) {
        for entry in try Self.paths(entries, name: "include", allowStar: true) {
            if entry == "*" { includeAll = true } else { try addPath(entry.split(separator: ".").map(String.init)) }
        }
    }

    /// `includeAll` given: every pointer.
    mutating func setIncludeAll() {
        includeAll = true
    }

    mutating func setKeys(_ entries: [String]) throws(QueryError) {
        keys = try Self.paths(entries, name: "keys", allowStar: false)
    }

    mutating func setExcludeKeys(_ entries: [String]) throws(QueryError) {
        excludeKeys = try Self.paths(entries, name: "excludeKeys", allowStar: false)
    }

    /// After every parameter: dotted `keys` and `excludeKeys` include their parents (`a.b.c`
    /// includes `a.b`), as Parse Server does; then the bounds.
    mutating func finish() throws(QueryError) {
        for key in (keys ?? []) + excludeKeys where key.contains(".") {
            var segments = key.split(separator: ".").map(String.init)
            segments.removeLast()
            try addPath(segments)
        }
        include.sort { $0.count < $1.count }
        if let deepest = include.map(\.count).max(), deepest > Self.maxIncludeDepth {
            throw .invalidQuery("Include depth of \(deepest) exceeds maximum allowed depth of \(Self.maxIncludeDepth)")
        }
    }

    /// The `keys` of the objects included at `path` (Parse's `includeRestOptions.keys`).
    func keys(under path: [String]) -> [String]? {
        guard let keys else { return nil }
        var result: [String] = []
        for key in keys {
            let segments = key.split(separator: ".").map(String.init)
            guard segments.count > path.count, Array(segments[0..<path.count]) == path else { continue }
            if !result.contains(segments[path.count]) { result.append(segments[path.count]) }
        }
        return result.isEmpty ? nil : result
    }

    /// The `excludeKeys` of the objects at `path` (`[]` for the rows themselves).
    func excludedKeys(under path: [String]) -> [String] {
        excludeKeys.compactMap { key in
            let segments = key.split(separator: ".").map(String.init)
            guard segments.count == path.count + 1, Array(segments[0..<path.count]) == path else { return nil }
            return segments[path.count]
        }
    }

    private mutating func addPath(_ segments: [String]) throws(QueryError) {
        for end in 1...max(1, segments.count) where end <= segments.count {
            let prefix = Array(segments[0..<end])
            guard !include.contains(prefix) else { continue }
            include.append(prefix)
            guard include.count <= Self.maxIncludePaths else {
                throw .invalidQuery("Number of include fields exceeds maximum allowed (\(Self.maxIncludePaths))")
            }
        }
    }

    /// The non-empty entries of a list, each a valid field path (or `*`).
    private static func paths(_ entries: [String], name: String, allowStar: Bool) throws(QueryError) -> [String] {
        var result: [String] = []
        for raw in entries {
            for part in raw.split(separator: ",") {
                var slice = part[...]
                while slice.first == " " { slice.removeFirst() }
                while slice.last == " " { slice.removeLast() }
                if slice.isEmpty { continue }
                let entry = String(slice)
                guard (allowStar && entry == "*") || (name == "keys" && entry == "$score") || FieldPath.isValidPath(entry) else {
                    throw .invalidQuery("invalid key in \(name): \(entry)")
                }
                if !result.contains(entry) {
                    result.append(entry)
                    guard result.count <= maxListEntries else { throw .invalidQuery("\(name) has more than \(maxListEntries) entries") }
                }
            }
        }
        return result
    }
}
