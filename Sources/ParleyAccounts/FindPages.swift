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
    static let firstPageRows = 8
    static let maxPageRows = 2000
    /// Most rows shaped (includes read) at once; fewer when they are large (about `chunkBytes`).
    static let shapeBlockRows = 200
    /// Most bytes `next()` hands out at once (a row of megabytes goes out in slices: the
    /// connection queues each whole).
    public static let sliceBytes = 128 << 10

    /// How rows are written.
    struct Output {
        let kind: RowJSON.Kind
        let viewer: Auth
        let keys: [String]?
        let relations: [SchemaStore.RelationField]
        let hidden: [String]
        /// `userField:` protections of the class's permissions.
        let userFields: [ClassAccess.UserFieldProtection]
        /// Set for shaped reads: applied to each block of objects.
        let shaper: IncludeResolver?
        let db: any SQLExecutor
    }

    private enum Source {
        /// Rows already read; `next` is the first not yet written.
        case rows(PostgresRows, next: Int)
        /// A cursor and the page being written (nil: fetch the next), from row `next`; `asked`
        /// is the rows that page was (or the next fetch will be) asked for, a shorter page being
        /// the last; `written` the bytes of the page written so far.
        case cursor(PostgresCursor, page: PostgresRows?, next: Int, asked: Int, written: Int)
        /// Every row is written.
        case exhausted
    }

    private let output: Output
    private let count: Int?
    private var source: Source
    private var started = false
    private var finished = false
    /// A chunk produced and not yet handed out whole, from `pendingOffset` on.
    private var pending: [UInt8]?
    private var pendingOffset = 0
    /// Bytes per shaped object so far (0: none shaped yet), to size the next block.
    private var shapedBytesPerRow = 0
    /// Rows written so far.
    private var written = 0

    private init(output: Output, count: Int?, source: Source) {
        self.output = output
        self.count = count
        self.source = source
    }

    deinit {
        if case .cursor(let cursor, _, _, _, _) = source { cursor.close() }
    }

    /// The answer over rows read in full: bytes when it fits one chunk, else pages.
    static func answer(rows: PostgresRows?, count: Int?, output: Output) async throws(ParseError) -> FindAnswer {
        let source: Source = rows.map { .rows($0, next: 0) } ?? .exhausted
        return try await FindPages(output: output, count: count, source: source).answer()
    }

    /// The answer over a cursor whose first page is `first` (asked `firstRows`).
    static func answer(cursor: PostgresCursor, first: PostgresRows, firstRows: Int, count: Int?, output: Output) async throws(ParseError) -> FindAnswer {
        try await FindPages(output: output, count: count, source: .cursor(cursor, page: first, next: 0, asked: firstRows, written: 0)).answer()
    }

    /// `answer(rows:…)` for rows written as stored (no shaper), without suspending: for a
    /// caller on an event loop thread.
    /// An answer that fits one chunk (the usual one) makes no `FindPages`.
    static func plainAnswer(rows: PostgresRows?, count: Int?, output: Output) -> FindAnswer {
        precondition(output.shaper == nil, "shaped rows take the async answer")
        var chunk: [UInt8] = []
        chunk.reserveCapacity(min(chunkBytes, 32 + (rows?.count ?? 0) * 512))
        chunk.append(contentsOf: #"{"results":["#.utf8)
        var written = 0
        let next = rows.map { $0.isEmpty ? 0 : writePlain($0, from: 0, output: output, written: &written, into: &chunk) } ?? 0
        guard let rows, next < rows.count else {
            writeTail(count: count, into: &chunk)
            return .bytes(chunk)
        }
        let pages = FindPages(output: output, count: count, source: .rows(rows, next: next))
        pages.started = true
        pages.written = written
        pages.pending = chunk
        return .pages(pages)
    }

    private func answer() async throws(ParseError) -> FindAnswer {
        let first = try await produce()
        if finished { return .bytes(first ?? []) }
        pending = first
        return .pages(self)
    }

    /// The next chunk of the body, at most `sliceBytes`; nil after the last.
    public func next() async throws(ParseError) -> [UInt8]? {
        if pending == nil {
            guard !finished else { return nil }
            pending = try await produce()
            pendingOffset = 0
        }
        guard let bytes = pending else { return nil }
        if pendingOffset == 0 && bytes.count <= Self.sliceBytes {
            pending = nil
            return bytes
        }
        let end = min(bytes.count, pendingOffset + Self.sliceBytes)
        let slice = Array(bytes[pendingOffset..<end])
        pendingOffset = end
        if end == bytes.count { pending = nil }
        return slice
    }

    /// Stops early: a cursor is closed now rather than when the pages are released.
    public func close() {
        if case .cursor(let cursor, _, _, _, _) = source { cursor.close() }
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
            let end = min(rows.count, start + shapeBlockRows)
            try await writeShaped(rows, start..<end, into: &chunk)
            source = end < rows.count ? .rows(rows, next: end) : .exhausted
        case .cursor(let cursor, let page, let start, let asked, let pageWritten):
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
            var index = start
            if output.shaper == nil {
                if index < rows.count { index = writePlain(rows, from: index, into: &chunk) }
            } else {
                while index < rows.count && chunk.count < Self.chunkBytes {
                    let end = min(rows.count, index + shapeBlockRows)
                    try await writeShaped(rows, index..<end, into: &chunk)
                    index = end
                }
            }
            let written = pageWritten + chunk.count - before
            if index < rows.count {
                source = .cursor(cursor, page: rows, next: index, asked: asked, written: written)
            } else if rows.count < asked {
                cursor.close()
                source = .exhausted
            } else {
                source = .cursor(cursor, page: nil, next: 0, asked: Self.nextPageRows(after: rows, bytes: written), written: 0)
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
            let index = writePlain(rows, from: start, into: &chunk)
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
        Self.writeTail(count: count, into: &chunk)
        finished = true
    }

    /// `]`, the count when asked for, `}`.
    private static func writeTail(count: Int?, into chunk: inout [UInt8]) {
        chunk.append(UInt8(ascii: "]"))
        if let count {
            chunk.append(contentsOf: #","count":"#.utf8)
            JSONValue.int(Int64(count)).serialize(into: &chunk)
        }
        chunk.append(UInt8(ascii: "}"))
    }

    /// Writes rows from `start` until the chunk reaches `chunkBytes`; returns the next row.
    private func writePlain(_ rows: PostgresRows, from start: Int, into chunk: inout [UInt8]) -> Int {
        Self.writePlain(rows, from: start, output: output, written: &written, into: &chunk)
    }

    /// `writePlain` with the count of rows written so far (for the commas) passed in.
    private static func writePlain(_ rows: PostgresRows, from start: Int, output: Output, written: inout Int, into chunk: inout [UInt8]) -> Int {
        let writer = RowJSON(output.kind, columns: rows.columns, viewer: output.viewer, keys: output.keys,
                             relations: output.relations, hidden: output.hidden, userFields: output.userFields)
        var index = start
        while index < rows.count && chunk.count < chunkBytes {
            if written > 0 { chunk.append(UInt8(ascii: ",")) }
            written += 1
            writer.write(rows[index], into: &chunk)
            index += 1
        }
        return index
    }

    private func separate(_ chunk: inout [UInt8]) {
        if written > 0 { chunk.append(UInt8(ascii: ",")) }
        written += 1
    }

    /// Rows of the next shaped block: about `chunkBytes` of objects as shaped so far.
    private var shapeBlockRows: Int {
        guard shapedBytesPerRow > 0 else { return Self.shapeBlockRows }
        return max(1, min(Self.shapeBlockRows, Self.chunkBytes / shapedBytesPerRow))
    }

    /// Shapes `range` of `rows` (one block) and writes the objects.
    private func writeShaped(_ rows: PostgresRows, _ range: Range<Int>, into chunk: inout [UInt8]) async throws(ParseError) {
        guard let shaper = output.shaper, !range.isEmpty else { return }
        let before = chunk.count
        defer { shapedBytesPerRow = max(1, (chunk.count - before) / range.count) }
        var objects = IncludeResolver.objects(output.kind, rows, range: range, viewer: output.viewer, keys: output.keys,
                                              relations: output.relations, hidden: output.hidden, userFields: output.userFields)
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

