import ParleyJSON
import ParleyPostgres
import Synchronization

/// Compiled SELECTs of equality-only queries by shape, so that a find repeating a shape with other
/// values (`{"username": <any string>}`) skips the compiler.
///
/// A shape is the class, the kind of reader (master, anonymous, a user), `limit`, `skip`, `order`,
/// `keys`, and the `where` fields in order with the JSON kind of each value. Only `where` objects
/// of plain `"field": string | number | boolean` members are considered.
///
/// The compiler stays the only author of SQL. The first query of a shape is compiled twice: with
/// its own values, and with a different sentinel value of the same kind in place of each value
/// and reader id. The shape is cached only when both give the same SQL and every parameter is
/// either the same in both or the one value (or the reader list) that changed, in an encoding
/// the cache reproduces (`text`, `jsonb` of the value, `boolean`, the reader array); otherwise
/// the shape is remembered as not cacheable and always compiled. Values holding U+0000 always
/// go to the compiler, which refuses them.
public final class CompiledQueryCache: Sendable {
    /// Where one parameter of a cached statement comes from.
    enum Source: Sendable, Equatable {
        case constant(PostgresData)
        /// `where` value number `n` as `text`.
        case text(Int)
        /// `where` value number `n` serialized, as `jsonb`.
        case json(Int)
        /// `where` value number `n` as `boolean`.
        case bool(Int)
        /// The reader list of `QueryCompiler.readerList`.
        case readers
    }

    /// A cached statement: its SQL and where each parameter comes from.
    struct Template: Sendable {
        let sql: String
        let sources: [Source]
        let usesRegex: Bool
    }

    private enum Entry: Sendable {
        case template(Template)
        case notCacheable
    }

    private struct Slot {
        var entry: Entry
        var lastUse: UInt64
    }

    private struct State {
        var slots: [ShapeKey: Slot] = [:]
        var clock: UInt64 = 0
        var hits = 0
    }

    /// Most shapes remembered (cacheable or not); the least recently used one makes room.
    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = 512) {
        self.capacity = max(1, capacity)
    }

    /// Shapes remembered, cacheable or not.
    public var count: Int { state.withLock { $0.slots.count } }

    /// Queries answered from a cached shape so far.
    public var hits: Int { state.withLock { $0.hits } }

    /// `QueryCompiler.compileSelect`, from the cache when the query's shape is cached.
    public func compileSelect(_ query: ParseQuery, layout: TableLayout, readerIDs: [String]?) throws(QueryError) -> CompiledQuery {
        guard let shape = Shape(query, layout: layout, readerIDs: readerIDs) else {
            return try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readerIDs)
        }
        let cached = state.withLock { state -> Entry? in
            guard let index = state.slots.index(forKey: shape.key) else { return nil }
            state.clock &+= 1
            state.slots.values[index].lastUse = state.clock
            let entry = state.slots.values[index].entry
            if case .template = entry { state.hits += 1 }
            return entry
        }
        switch cached {
        case .template(let template)?:
            return CompiledQuery(sql: template.sql, parameters: template.sources.map { Self.parameter($0, values: shape.members, readerIDs: readerIDs) },
                                 usesRegex: template.usesRegex)
        case .notCacheable?:
            return try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readerIDs)
        case nil:
            let compiled = try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readerIDs)
            let entry = Self.template(for: query, compiled: compiled, shape: shape, layout: layout, readerIDs: readerIDs)
                .map(Entry.template) ?? .notCacheable
            store(entry, for: shape.key)
            return compiled
        }
    }

    private func store(_ entry: Entry, for key: ShapeKey) {
        state.withLock { state in
            if state.slots[key] == nil, state.slots.count >= capacity,
               let oldest = state.slots.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                state.slots[oldest] = nil
            }
            state.clock &+= 1
            state.slots[key] = Slot(entry: entry, lastUse: state.clock)
        }
    }

    private static func parameter(_ source: Source, values: [JSONValue], readerIDs: [String]?) -> PostgresData {
        parameter(source, value: { values[$0] }, readerIDs: readerIDs)
    }

    private static func parameter(_ source: Source, values: JSONObject, readerIDs: [String]?) -> PostgresData {
        parameter(source, value: { values[$0].value }, readerIDs: readerIDs)
    }

    private static func parameter(_ source: Source, value: (Int) -> JSONValue, readerIDs: [String]?) -> PostgresData {
        switch source {
        case .constant(let data): data
        case .text(let n): .text(value(n).string ?? "")
        case .json(let n): .json(value(n).serialized())
        case .bool(let n): .bool(value(n).bool ?? false)
        case .readers: .textArray(QueryCompiler.readerList(readerIDs ?? []))
        }
    }

    /// The template of `compiled`, or nil when the compiler's output cannot be shown to depend on
    /// the values only as `Source`s (see the type's documentation).
    private static func template(for query: ParseQuery, compiled: CompiledQuery, shape: Shape, layout: TableLayout,
                                 readerIDs: [String]?) -> Template? {
        let values = shape.members.values
        let sentinels = values.enumerated().map { sentinel(for: $0.element, index: $0.offset) }
        let sentinelReaders = readerIDs.map { ids in ids.enumerated().map { "\u{E000}reader\($0.offset)\u{E001}" } }
        guard case .object(let members)? = query.where ?? .object(JSONObject()) else { return nil }
        var probe = query
        probe.where = query.where == nil ? nil : .object(JSONObject(zip(members.keys, sentinels)))
        guard let probed = try? QueryCompiler.compileSelect(probe, layout: layout, readerIDs: sentinelReaders),
              probed.sql == compiled.sql, probed.parameters.count == compiled.parameters.count else { return nil }
        var sources: [Source] = []
        for (actual, alternative) in zip(compiled.parameters, probed.parameters) {
            if actual == alternative {
                sources.append(.constant(actual))
                continue
            }
            var candidates: [Source] = []
            for (n, value) in values.enumerated() {
                var encodings = [Source.json(n)]
                if case .string = value { encodings.append(.text(n)) }
                if case .bool = value { encodings.append(.bool(n)) }
                for source in encodings
                    where parameter(source, values: sentinels, readerIDs: nil) == alternative && parameter(source, values: values, readerIDs: nil) == actual {
                    candidates.append(source)
                }
            }
            if parameter(.readers, values: [], readerIDs: sentinelReaders) == alternative
                && parameter(.readers, values: [], readerIDs: readerIDs) == actual {
                candidates.append(.readers)
            }
            guard candidates.count == 1 else { return nil }
            sources.append(candidates[0])
        }
        return Template(sql: compiled.sql, sources: sources, usesRegex: compiled.usesRegex)
    }

    /// A value of the same JSON kind that differs from `value` (and from the other sentinels).
    private static func sentinel(for value: JSONValue, index: Int) -> JSONValue {
        switch value {
        case .string(let text): .string(text + "\u{E000}\(index)\u{E001}")
        case .int(let number): .int(number &+ 1 &+ Int64(index))
        case .double(let number): .double(number + 1 + Double(index) != number ? number + 1 + Double(index) : -number)
        case .bool(let flag): .bool(!flag)
        default: value
        }
    }

    /// The bytes identifying a shape: every part length-prefixed, so distinct shapes never
    /// share a key. Bytes rather than a `String`: building it runs for every find.
    struct ShapeKey: Hashable {
        private(set) var bytes: [UInt8] = []

        init() {
            bytes.reserveCapacity(128)
        }

        mutating func add(_ text: String) {
            var text = text
            text.withUTF8 { utf8 in
                add(utf8.count)
                bytes.append(contentsOf: utf8)
            }
        }

        /// Seven bits a byte, the last byte's high bit clear (LEB128): the numbers of a shape
        /// (counts, `limit`, `skip`) are mostly one byte.
        mutating func add(_ number: Int) {
            var rest = UInt64(bitPattern: Int64(number))
            while rest >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
                rest >>= 7
            }
            bytes.append(UInt8(truncatingIfNeeded: rest))
        }

        mutating func add(_ byte: UInt8) {
            bytes.append(byte)
        }

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// What identifies a cached statement, and the `where` members whose values fill it in.
    private struct Shape {
        let key: ShapeKey
        let members: JSONObject

        init?(_ query: ParseQuery, layout: TableLayout, readerIDs: [String]?) {
            guard case .permissions = layout.readAccess else { return nil }
            var key = ShapeKey()
            key.add(query.className)
            key.add(layout.table)
            key.add(readerIDs?.count ?? -1)
            key.add(query.limit)
            key.add(query.skip)
            key.add(query.order.count)
            for order in query.order {
                key.add(order.field)
                key.add(order.descending ? 1 : 0)
            }
            key.add(query.keys?.count ?? -1)
            for name in query.keys ?? [] { key.add(name) }
            switch query.where {
            case nil:
                key.add(-1)
                members = JSONObject()
            case .object(let members)?:
                key.add(members.count)
                self.members = members
                for (field, value) in members {
                    let kind: UInt8
                    switch value {
                    case .string(let text):
                        guard !text.utf8.contains(0) else { return nil }
                        kind = UInt8(ascii: "s")
                    case .int: kind = UInt8(ascii: "i")
                    case .double: kind = UInt8(ascii: "d")
                    case .bool: kind = UInt8(ascii: "b")
                    default: return nil
                    }
                    guard field.utf8.first != UInt8(ascii: "$") else { return nil }
                    key.add(field)
                    key.add(kind)
                }
            default:
                return nil
            }
            self.key = key
        }
    }
}
