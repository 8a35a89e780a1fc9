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
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: PostgresColumns
    /// Cells row by row, `nil` for SQL NULL, in PostgreSQL's text format.
    let cells: [String?]
    /// The command tag, e.g. `INSERT 0 1` or `SELECT 3`.
    public let commandTag: String
    /// Rows affected by INSERT/UPDATE/DELETE/SELECT/MOVE/FETCH/COPY (0 when the tag has no count).
    public let affectedRows: Int

    init(columns: PostgresColumns, cells: [String?], commandTag: String, affectedRows: Int) {
        self.columns = columns
        self.cells = cells
        self.commandTag = commandTag
        self.affectedRows = affectedRows
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.names.isEmpty ? 0 : cells.count / columns.names.count }
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
        guard let column = rows.columns.index(of: name) else { return PostgresCell(text: nil, typeOID: 0) }
        return self[column]
    }

    /// The cell at a column index (precondition: `0 <= column < count`).
    public subscript(_ column: Int) -> PostgresCell {
        precondition(column >= 0 && column < count, "column index \(column) out of range 0..<\(count)")
        return PostgresCell(text: rows.cells[index * count + column], typeOID: rows.columns.typeOIDs[column])
    }

    /// Whether the result has a column with this name.
    public func contains(_ name: String) -> Bool { rows.columns.index(of: name) != nil }
}

/// One value of a row in text format, with typed accessors. Each accessor returns nil for NULL
/// and for text that does not parse as that type.
public struct PostgresCell: Sendable, Equatable {
    /// The raw text, nil for SQL NULL.
    public let text: String?
    /// The column's type OID.
    public let typeOID: UInt32

    public var isNull: Bool { text == nil }

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
        switch text {
        case "t", "true": true
        case "f", "false": false
        default: nil
        }
    }

    /// JSON text of a `json`/`jsonb` column (raw, not parsed).
    public var json: String? { text }

    /// `timestamptz`, `timestamp` (read as UTC) or `date` as milliseconds since the Unix epoch.
    public var timestampMilliseconds: Int64? {
        guard let text else { return nil }
        return PostgresText.parseTimestamp(text)
    }

    /// `bytea` contents.
    public var bytes: [UInt8]? {
        guard let text else { return nil }
        return PostgresText.decodeBytea(text)
    }
}
