import CLibPQ
import ParleyLog
import Synchronization

/// Column metadata shared by every row of one result.
public final class PostgresColumns: Sendable {
    /// Column names in result order.
    public let names: [String]
    /// Type OIDs in result order.
    public let typeOIDs: [UInt32]
    /// A hash index for wide results; narrower ones are searched linearly (cheaper than hashing).
    private let indexByName: [String: Int]?
    /// The last answer of `positions(of:)`.
    private let rememberedPositions = Mutex<(names: PostgresColumnNames, positions: [Int?])?>(nil)

    /// Results with more columns than this get a hash index of their names.
    static let indexThreshold = 16

    init(names: [String], typeOIDs: [UInt32]) {
        self.names = names
        self.typeOIDs = typeOIDs
        if names.count > Self.indexThreshold {
            var index: [String: Int] = [:]
            for (i, name) in names.enumerated() where index[name] == nil { index[name] = i }
            indexByName = index
        } else {
            indexByName = nil
        }
    }

    /// Index of the first column with this name.
    public func index(of name: String) -> Int? {
        if let indexByName { return indexByName[name] }
        // Lengths first: most names differ in length, and comparing them is nearly free.
        let length = name.utf8.count
        return names.firstIndex { $0.utf8.count == length && $0 == name }
    }

    /// The position of each of `wanted`'s names (nil where absent). The last answer is kept:
    /// every result of a prepared statement shares one columns object, so a writer that reads
    /// the same columns of every find looks them up once, not once per result.
    public func positions(of wanted: PostgresColumnNames) -> [Int?] {
        if let remembered = rememberedPositions.withLock({ $0 }), remembered.names === wanted {
            return remembered.positions
        }
        let positions = wanted.names.map { index(of: $0) }
        rememberedPositions.withLock { $0 = (wanted, positions) }
        return positions
    }
}

/// Column names a reader looks up in many results (see `PostgresColumns.positions(of:)`).
public final class PostgresColumnNames: Sendable {
    public let names: [String]

    public init(_ names: [String]) {
        self.names = names
    }
}

/// The result of one statement: rows (possibly none) plus the command tag.
///
/// The cells stay in libpq's result, which the rows keep alive: a cell becomes a `String` (or a
/// number, a date…) only when it is read, and `PostgresCell.withBytes` reads it in place.
public struct PostgresRows: Sendable, RandomAccessCollection {
    let result: LibPQResult

    init(_ result: LibPQResult) {
        self.result = result
    }

    public var columns: PostgresColumns { result.columns }

    /// The command tag, e.g. `INSERT 0 1` or `SELECT 3`.
    public var commandTag: String {
        guard let pointer = result.pointer, let tag = PQcmdStatus(pointer) else { return "" }
        return String(cString: tag)
    }

    /// Rows affected by INSERT/UPDATE/DELETE/SELECT/MOVE/FETCH/COPY (0 when the tag has no count).
    public var affectedRows: Int {
        guard let pointer = result.pointer, let count = PQcmdTuples(pointer) else { return 0 }
        return Int(String(cString: count)) ?? 0
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { result.rowCount }
    public subscript(position: Int) -> PostgresRow { PostgresRow(result: result, index: position) }
}

/// One row of a result. `row["name"]` or `row[0]` gives a cell with typed accessors.
public struct PostgresRow: Sendable {
    let result: LibPQResult
    let index: Int

    /// Number of columns.
    public var count: Int { result.columns.names.count }

    /// The cell of the first column with this name; a NULL cell when there is no such column
    /// (check `contains(_:)` when that matters).
    public subscript(_ name: String) -> PostgresCell {
        guard let column = result.columns.index(of: name) else { return PostgresCell(result: nil, row: 0, column: 0, typeOID: 0) }
        return self[column]
    }

    /// The cell at a column index (precondition: `0 <= column < count`, and the row is one of its result).
    public subscript(_ column: Int) -> PostgresCell {
        precondition(column >= 0 && column < count, "column index \(column) out of range 0..<\(count)")
        precondition(index >= 0 && index < result.rowCount, "row \(index) of \(result.rowCount)")
        return PostgresCell(result: result, row: Int32(index), column: Int32(column), typeOID: result.columns.typeOIDs[column])
    }

    /// Whether the result has a column with this name.
    public func contains(_ name: String) -> Bool { result.columns.index(of: name) != nil }
}

/// One value of a row in text format, with typed accessors. Each accessor returns nil for NULL
/// and for text that does not parse as that type.
public struct PostgresCell: Sendable, Equatable {
    @usableFromInline let result: LibPQResult?
    @usableFromInline let row: Int32
    @usableFromInline let column: Int32
    /// The column's type OID.
    public let typeOID: UInt32

    init(result: LibPQResult?, row: Int32, column: Int32, typeOID: UInt32) {
        self.result = result
        self.row = row
        self.column = column
        self.typeOID = typeOID
    }

    /// Calls `body` with the cell's text as UTF-8 bytes, in place (nil for SQL NULL). The bytes
    /// are valid only inside `body`. Inlinable, so that callers in other modules get it
    /// specialized: writers call it for most cells of every row.
    @inlinable
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>?) throws -> R) rethrows -> R {
        guard let pointer = result?.pointer, PQgetisnull(pointer, row, column) == 0, let value = PQgetvalue(pointer, row, column) else {
            return try body(nil)
        }
        let length = Int(PQgetlength(pointer, row, column))
        return try body(UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: length))
    }

    /// The raw text, nil for SQL NULL.
    public var text: String? {
        withBytes { bytes in bytes.map { String(decoding: $0, as: UTF8.self) } }
    }

    public var isNull: Bool {
        guard let pointer = result?.pointer else { return true }
        return PQgetisnull(pointer, row, column) == 1
    }

    public static func == (lhs: PostgresCell, rhs: PostgresCell) -> Bool {
        lhs.typeOID == rhs.typeOID && lhs.text == rhs.text
    }

    /// The text as is.
    public var string: String? { text }

    public var int: Int? {
        guard let text else { return nil }
        return Int(text)
    }

    public var double: Double? {
        guard let text else { return nil }
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: return Double(text)
        }
    }

    public var bool: Bool? {
        withBytes { bytes in
            guard let bytes else { return nil }
            if bytes.count == 1 {
                return bytes[0] == UInt8(ascii: "t") ? true : bytes[0] == UInt8(ascii: "f") ? false : nil
            }
            return bytes.elementsEqual("true".utf8) ? true : bytes.elementsEqual("false".utf8) ? false : nil
        }
    }

    /// JSON text of a `json`/`jsonb` column (raw, not parsed).
    public var json: String? { text }

    /// `timestamptz`, `timestamp` (read as UTC) or `date` as milliseconds since the Unix epoch.
    public var timestampMilliseconds: Int64? {
        withBytes { bytes in bytes.flatMap { UTCTime.parseTimestamp(bytes: $0) } }
    }

    /// `bytea` contents.
    public var bytes: [UInt8]? {
        guard let text else { return nil }
        return PostgresText.decodeBytea(text)
    }
}
