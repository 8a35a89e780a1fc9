import ParleyJSON
import ParleyPostgres

/// A find's answer: complete bytes, or pages produced as the reader takes them.
public enum FindAnswer: Sendable {
    case bytes([UInt8])
    case pages(FindPages)

    /// The whole answer, at most `limit` bytes (past it `answerTooLarge`).
    public func collect(upTo limit: Int = .max) async throws(ParseError) -> [UInt8] {
        switch self {
        case .bytes(let bytes):
            guard bytes.count <= limit else { throw .answerTooLarge(limit: limit) }
            return bytes
        case .pages(let pages):
            var collected: [UInt8] = []
            while let chunk = try await pages.next() {
                guard chunk.count <= limit - collected.count else {
                    pages.close()
                    throw .answerTooLarge(limit: limit)
                }
                collected.append(contentsOf: chunk)
            }
            return collected
        }
    }
}

/// The body of one find, `{"results":[…]}` (plus `"count"`), written a chunk at a time from rows
/// held in memory or from a cursor's pages: the same bytes `RowJSON.results` (or, shaped,
/// `IncludeResolver.body`) writes in one piece, with the memory of one chunk plus one page.
///
/// Rows held in memory are written until a chunk reaches `chunkBytes`; a cursor is fetched a
/// page at a time, the page's row count adapted so a page holds about `pageBytes`. Shaped rows
/// (includes, dotted keys, excluded keys) are shaped a block at a time, each block's include
/// targets read in one statement per path and class.
///
/// Thread confinement: one `next()` at a time (the HTTP server's rule for a stream).
public final class FindPages: @unchecked Sendable {
    /// Bytes one chunk reaches before it is handed out (rows held in memory).
    public static let chunkBytes = 256 << 10
    /// Bytes a cursor page should hold.
    public static let pageBytes = 512 << 10
    /// Rows of a cursor's first page, and the most of any page.
    static let firstPageRows = 16
    static let maxPageRows = 2000
    /// Rows shaped (includes read) at once.
    static let shapeBlockRows = 200

    /// How rows are written.
    struct Output {
        let kind: RowJSON.Kind
        let viewer: Auth
        let keys: [String]?
        let relations: [SchemaStore.RelationField]
        let hidden: [String]
        /// Set for shaped reads: applied to each block of objects.
        let shaper: IncludeResolver?
        let db: any SQLExecutor
    }

    private enum Source {
        /// Rows already read; `next` is the first not yet written.
        case rows(PostgresRows, next: Int)
        /// A cursor; `page` is a page read already (the first), `asked` the rows that page was
        /// (or the next fetch will be) asked for: a page shorter than that is the last.
        case cursor(PostgresCursor, page: PostgresRows?, asked: Int)
        /// Every row is written.
        case exhausted
    }

    private let output: Output
    private let count: Int?
    private var source: Source
    private var started = false
    private var finished = false
    /// A chunk produced by `answer()` and not yet handed out.
    private var pending: [UInt8]?
    /// Rows written so far.
    private var written = 0

    private init(output: Output, count: Int?, source: Source) {
        self.output = output
        self.count = count
        self.source = source
    }

    deinit {
        if case .cursor(let cursor, _, _) = source { cursor.close() }
    }

    /// The answer over rows read in full: bytes when it fits one chunk, else pages.
    static func answer(rows: PostgresRows?, count: Int?, output: Output) async throws(ParseError) -> FindAnswer {
        let source: Source = rows.map { .rows($0, next: 0) } ?? .exhausted
        return try await FindPages(output: output, count: count, source: source).answer()
    }

    /// The answer over a cursor whose first page is `first` (asked `firstRows`).
    static func answer(cursor: PostgresCursor, first: PostgresRows, firstRows: Int, count: Int?, output: Output) async throws(ParseError) -> FindAnswer {
        try await FindPages(output: output, count: count, source: .cursor(cursor, page: first, asked: firstRows)).answer()
    }

    /// `answer(rows:…)` for rows written as stored (no shaper), without suspending: for a
    /// caller on an event loop thread.
    static func plainAnswer(rows: PostgresRows?, count: Int?, output: Output) -> FindAnswer {
        precondition(output.shaper == nil, "shaped rows take the async answer")
        let pages = FindPages(output: output, count: count, source: rows.map { .rows($0, next: 0) } ?? .exhausted)
        let first = pages.produceRows()
        if pages.finished { return .bytes(first) }
        pages.pending = first
        return .pages(pages)
    }

    private func answer() async throws(ParseError) -> FindAnswer {
        let first = try await produce()
        if finished { return .bytes(first ?? []) }
        pending = first
        return .pages(self)
    }

    /// The next chunk of the body; nil after the last.
    public func next() async throws(ParseError) -> [UInt8]? {
        if let pending {
            self.pending = nil
            return pending
        }
        guard !finished else { return nil }
        return try await produce()
    }

    /// Stops early: a cursor is closed now rather than when the pages are released.
    public func close() {
        if case .cursor(let cursor, _, _) = source { cursor.close() }
        source = .exhausted
        finished = true
    }

    /// Writes the next chunk (nil when nothing is left, which `next` never returns mid-body).
    private func produce() async throws(ParseError) -> [UInt8]? {
        guard !finished else { return nil }
        if case .rows = source, output.shaper == nil { return produceRows() }
        var chunk = begin()
        switch source {
        case .rows(let rows, let start):
            let end = min(rows.count, start + Self.shapeBlockRows)
            try await writeShaped(rows, start..<end, into: &chunk)
            source = end < rows.count ? .rows(rows, next: end) : .exhausted
        case .cursor(let cursor, let page, let asked):
            let rows: PostgresRows
            if let page {
                rows = page
            } else {
                do {
                    rows = try await cursor.fetch(asked)
                } catch {
                    close()
                    throw ParseError.database(error)
                }
            }
            let before = chunk.count
            if output.shaper == nil {
                if !rows.isEmpty { writePlain(rows, 0..<rows.count, into: &chunk) }
            } else {
                var start = 0
                while start < rows.count {
                    let end = min(rows.count, start + Self.shapeBlockRows)
                    try await writeShaped(rows, start..<end, into: &chunk)
                    start = end
                }
            }
            if rows.count < asked {
                cursor.close()
                source = .exhausted
            } else {
                source = .cursor(cursor, page: nil, asked: Self.nextPageRows(after: rows, bytes: chunk.count - before))
            }
        case .exhausted:
            break
        }
        end(&chunk)
        return chunk
    }

    /// `produce` for rows held in memory and written as stored: no suspension.
    private func produceRows() -> [UInt8] {
        var chunk = begin()
        if case .rows(let rows, let start) = source {
            let writer = RowJSON(output.kind, columns: rows.columns, viewer: output.viewer, keys: output.keys,
                                 relations: output.relations, hidden: output.hidden)
            var index = start
            while index < rows.count && chunk.count < Self.chunkBytes {
                separate(&chunk)
                writer.write(rows[index], into: &chunk)
                index += 1
            }
            source = index < rows.count ? .rows(rows, next: index) : .exhausted
        }
        end(&chunk)
        return chunk
    }

    /// A new chunk, opening the body if this is the first.
    private func begin() -> [UInt8] {
        var chunk: [UInt8] = []
        if !started {
            started = true
            chunk.append(contentsOf: #"{"results":["#.utf8)
        }
        return chunk
    }

    /// Closes the body once every row is written.
    private func end(_ chunk: inout [UInt8]) {
        guard case .exhausted = source, !finished else { return }
        chunk.append(UInt8(ascii: "]"))
        if let count {
            chunk.append(contentsOf: #","count":"#.utf8)
            JSONValue.int(Int64(count)).serialize(into: &chunk)
        }
        chunk.append(UInt8(ascii: "}"))
        finished = true
    }

    private func writePlain(_ rows: PostgresRows, _ range: Range<Int>, into chunk: inout [UInt8]) {
        let writer = RowJSON(output.kind, columns: rows.columns, viewer: output.viewer, keys: output.keys,
                             relations: output.relations, hidden: output.hidden)
        for index in range {
            separate(&chunk)
            writer.write(rows[index], into: &chunk)
        }
    }

    private func separate(_ chunk: inout [UInt8]) {
        if written > 0 { chunk.append(UInt8(ascii: ",")) }
        written += 1
    }

    /// Shapes `range` of `rows` (one block) and writes the objects.
    private func writeShaped(_ rows: PostgresRows, _ range: Range<Int>, into chunk: inout [UInt8]) async throws(ParseError) {
        guard let shaper = output.shaper, !range.isEmpty else { return }
        var objects = IncludeResolver.objects(output.kind, rows, range: range, viewer: output.viewer, keys: output.keys,
                                              relations: output.relations, hidden: output.hidden)
        try await shaper.apply(&objects, on: output.db)
        for object in objects {
            separate(&chunk)
            JSONValue.object(object).serialize(into: &chunk)
        }
    }

    /// Rows to fetch next so a page holds about `pageBytes`, from the last page's bytes per row.
    private static func nextPageRows(after rows: PostgresRows, bytes: Int) -> Int {
        guard !rows.isEmpty, bytes > 0 else { return firstPageRows }
        let perRow = max(1, bytes / rows.count)
        return max(1, min(maxPageRows, pageBytes / perRow))
    }
}

extension ParseError {
    /// An answer that must be sent whole is larger than the node allows (`--max-answer-size`).
    public static func answerTooLarge(limit: Int) -> ParseError {
        .objectTooLarge("The answer is larger than the \(limit) bytes this server sends at once; ask for fewer objects or fields (limit, keys).")
    }
}
