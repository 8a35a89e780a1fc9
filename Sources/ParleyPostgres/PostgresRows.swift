import CLibPQ
import ParleyLog

/// Column metadata shared by every row of one result.
public final class PostgresColumns: Sendable {
    /// Column names in result order.
    public let names: [String]
    /// Type OIDs in result order.
    public let typeOIDs: [UInt32]
    /// A hash index for wide results; narrower ones are searched linearly (cheaper than hashing).
    private let indexByName: [String: Int]?

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
}

/// The result of one statement: rows (possibly none) plus the command tag.
///
/// The cells stay in libpq's result, which the rows keep alive: a cell becomes a `String` (or a
/// number, a date…) only when it is read, and `PostgresCell.withBytes` reads it in place.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: PostgresColumns
    /// The result holding the cells (PostgreSQL's text format); nil when there are no rows.
    let result: LibPQResult?
    let rowCount: Int
    /// The command tag, e.g. `INSERT 0 1` or `SELECT 3`.
    public let commandTag: String
    /// Rows affected by INSERT/UPDATE/DELETE/SELECT/MOVE/FETCH/COPY (0 when the tag has no count).
    public let affectedRows: Int

    init(columns: PostgresColumns, result: LibPQResult?, rowCount: Int, commandTag: String, affectedRows: Int) {
        self.columns = columns
        self.result = result
        self.rowCount = result == nil ? 0 : rowCount
        self.commandTag = commandTag
        self.affectedRows = affectedRows
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { rowCount }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, index: position) }
}

/// One row of a result. `row["name"]` or `row[0]` gives a cell with typed accessors.
public struct PostgresRow: Sendable {
    let rows: PostgresRows
    let index: Int

    /// Number of columns.
    public var count: Int { rows.columns.names.count }

    /// The cell of the first column with this name; a NULL cell when there is no such column
    /// (check `contains(_:)` when that matters).
    public subscript(_ name: String) -> PostgresCell {
        guard let column = rows.columns.index(of: name) else { return PostgresCell(result: nil, row: 0, column: 0, typeOID: 0) }
        return self[column]
    }

    /// The cell at a column index (precondition: `0 <= column < count`, and the row is one of its result).
    public subscript(_ column: Int) -> PostgresCell {
        precondition(column >= 0 && column < count, "column index \(column) out of range 0..<\(count)")
        precondition(index >= 0 && index < rows.rowCount, "row \(index) of \(rows.rowCount)")
        return PostgresCell(result: rows.result, row: Int32(index), column: Int32(column), typeOID: rows.columns.typeOIDs[column])
    }

    /// Whether the result has a column with this name.
    public func contains(_ name: String) -> Bool { rows.columns.index(of: name) != nil }
}

/// One value of a row in text format, with typed accessors. Each accessor returns nil for NULL
/// and for text that does not parse as that type.
public struct PostgresCell: Sendable, Equatable {
    private let result: LibPQResult?
    private let row: Int32
    private let column: Int32
    /// The column's type OID.
    public let typeOID: UInt32

    init(result: LibPQResult?, row: Int32, column: Int32, typeOID: UInt32) {
        self.result = result
        self.row = row
        self.column = column
        self.typeOID = typeOID
    }

    /// Calls `body` with the cell's text as UTF-8 bytes, in place (nil for SQL NULL). The bytes
    /// are valid only inside `body`.
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>?) throws -> R) rethrows -> R {
        guard let result, PQgetisnull(result.pointer, row, column) == 0, let value = PQgetvalue(result.pointer, row, column) else {
            return try body(nil)
        }
        let length = Int(PQgetlength(result.pointer, row, column))
        return try value.withMemoryRebound(to: UInt8.self, capacity: length) { try body(UnsafeBufferPointer(start: $0, count: length)) }
    }

    /// The raw text, nil for SQL NULL.
    public var text: String? {
        withBytes { bytes in bytes.map { String(decoding: $0, as: UTF8.self) } }
    }

    public var isNull: Bool {
        guard let result else { return true }
        return PQgetisnull(result.pointer, row, column) == 1
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
