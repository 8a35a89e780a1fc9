import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

/// Conversions between libpq's C API and the client's Swift types.
enum LibPQ {
    /// The columns of a `PGRES_TUPLES_OK`/`PGRES_COMMAND_OK` result. `knownColumns` (the
    /// columns of an earlier result of the same prepared statement) is reused when the count and
    /// the type OIDs match, which saves building the column list per result. Names need no check:
    /// PostgreSQL refuses to run a prepared statement whose result row type (names included)
    /// changed since it was prepared ("cached plan must not change result type").
    private static func columns(of result: OpaquePointer, known knownColumns: PostgresColumns?) -> PostgresColumns {
        let columnCount = Int(PQnfields(result))
        if let knownColumns, knownColumns.typeOIDs.count == columnCount,
           knownColumns.typeOIDs.indices.allSatisfy({ PQftype(result, Int32($0)) == knownColumns.typeOIDs[$0] }) {
            return knownColumns
        }
        var names: [String] = []
        var oids: [UInt32] = []
        names.reserveCapacity(columnCount)
        oids.reserveCapacity(columnCount)
        for c in 0..<columnCount {
            names.append(PQfname(result, Int32(c)).map { String(cString: $0) } ?? "?column?")
            oids.append(PQftype(result, Int32(c)))
        }
        return PostgresColumns(names: names, typeOIDs: oids)
    }

    /// The error of a `PGRES_FATAL_ERROR` result.
    static func serverError(_ result: OpaquePointer) -> PostgresServerError {
        func field(_ code: Int32) -> String? {
            guard let value = PQresultErrorField(result, code) else { return nil }
            return String(cString: value)
        }
        let fallback = PQresultErrorMessage(result).map { String(cString: $0) } ?? "unknown error"
        return PostgresServerError(
            severity: field(Int32(UInt8(ascii: "V"))) ?? field(Int32(UInt8(ascii: "S"))) ?? "ERROR",
            sqlState: field(Int32(UInt8(ascii: "C"))) ?? "XX000",
            message: field(Int32(UInt8(ascii: "M"))) ?? trimmed(fallback),
            detail: field(Int32(UInt8(ascii: "D"))),
            hint: field(Int32(UInt8(ascii: "H"))),
            table: field(Int32(UInt8(ascii: "t"))),
            column: field(Int32(UInt8(ascii: "c"))),
            constraint: field(Int32(UInt8(ascii: "n")))
        )
    }

    /// A finished result as rows, which own `result` from here on, or an error (`result` is
    /// cleared).
    static func outcome(taking result: OpaquePointer, knownColumns: PostgresColumns? = nil) -> Result<PostgresRows, PostgresError> {
        let status = PQresultStatus(result)
        switch status {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_SINGLE_TUPLE:
            return .success(PostgresRows(LibPQResult(result, columns: columns(of: result, known: knownColumns))))
        default:
            defer { PQclear(result) }
            return outcome(status, result)
        }
    }

    private static func outcome(_ status: ExecStatusType, _ result: OpaquePointer) -> Result<PostgresRows, PostgresError> {
        switch status {
        case PGRES_EMPTY_QUERY:
            return .success(PostgresRows(LibPQResult(nil, columns: PostgresColumns(names: [], typeOIDs: []))))
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            let error = serverError(result)
            if PostgresError.isConnectionTermination(error.sqlState) {
                return .failure(.connectionClosed(error.description))
            }
            return .failure(.server(error))
        case PGRES_PIPELINE_ABORTED:
            return .failure(.server(PostgresServerError(severity: "ERROR", sqlState: "25P02",
                message: "not executed: an earlier statement in the same pipeline segment failed")))
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            return .failure(.unsupported("COPY is not supported by this client"))
        default:
            return .failure(.unsupported("unexpected result status \(status.rawValue)"))
        }
    }

    /// The connection's last error message, trimmed.
    static func errorMessage(_ connection: OpaquePointer?) -> String {
        guard let connection, let message = PQerrorMessage(connection) else { return "unknown error" }
        let text = trimmed(String(cString: message))
        return text.isEmpty ? "unknown error" : text
    }

    static func trimmed(_ text: String) -> String {
        var s = Substring(text)
        while let last = s.last, last == "\n" || last == " " { s = s.dropLast() }
        return String(s)
    }

    /// Fails when text to be passed as a C string contains a NUL (libpq would silently truncate it).
    static func checkNoNUL(_ text: String, _ what: @autoclosure () -> String) throws(PostgresError) {
        var text = text
        if text.withUTF8(containsNUL) { throw .nulInText(what()) }
    }

    /// Whether `bytes` holds a NUL (memchr: SQL texts are checked on every unprepared statement).
    static func containsNUL(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
        return memchr(base, 0, bytes.count) != nil
    }

    /// Session settings every connection uses, so text output parses the same way everywhere.
    static func sessionSetupSQL(statementTimeoutMilliseconds: Int?) -> String {
        var settings = "SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, MDY', false)"
        if let ms = statementTimeoutMilliseconds {
            settings += ", set_config('statement_timeout', '\(max(0, ms))', false)"
        }
        return settings
    }

    /// Keyword/value arrays for `PQconnectdbParams`/`PQconnectStartParams`. Defaults before
    /// `dbname` (keepalives so a dead peer is noticed in about a minute, a connect timeout for
    /// blocking connects, the application name) can be overridden by the connection string
    /// (URI or `key=value`, expanded as `dbname`); the client encoding after it is forced to UTF-8.
    static func withConnectParameters<R>(_ connectionString: String, _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let pairs = [
            ("fallback_application_name", "parley"), ("keepalives", "1"), ("keepalives_idle", "30"),
            ("keepalives_interval", "10"), ("keepalives_count", "3"), ("connect_timeout", "10"),
            ("dbname", connectionString), ("client_encoding", "UTF8"),
        ]
        let keywords = CStringArray(pairs.map(\.0))
        let values = CStringArray(pairs.map(\.1))
        return withExtendedLifetime((keywords, values)) {
            keywords.pointers.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: pairs.count + 1) { k in
                values.pointers.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: pairs.count + 1) { v in
                    body(k, v)
                }
            }
        }
    }

    /// A notice processor that drops server notices (libpq's default prints them to stderr).
    static let silentNoticeProcessor: PQnoticeProcessor = { _, _ in }
}

/// Statement parameters laid out as libpq wants them (text format, explicit type OIDs): every
/// value NUL-terminated in one buffer. A connection keeps one and re-encodes into it, so after the
/// first statements a statement's parameters allocate nothing.
struct LibPQParameters {
    private(set) var count: Int32 = 0
    /// Type OIDs in parameter order (0: let the server infer the type).
    private(set) var types: [UInt32] = []
    private var bytes: [UInt8] = []
    /// Where each value starts in `bytes`; -1 for SQL NULL.
    private var offsets: [Int] = []

    init() {}

    init(_ params: [PostgresData]) throws(PostgresError) {
        try encode(params)
    }

    /// Replaces the parameters with `params`, keeping the storage.
    mutating func encode(_ params: [PostgresData]) throws(PostgresError) {
        guard params.count <= 65_535 else { throw .unsupported("\(params.count) parameters (the protocol allows 65535)") }
        count = Int32(params.count)
        types.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
        bytes.removeAll(keepingCapacity: true)
        types.reserveCapacity(params.count)
        offsets.reserveCapacity(params.count)
        bytes.reserveCapacity(64 * params.count)
        for (i, param) in params.enumerated() {
            types.append(param.typeOID)
            let start = bytes.count
            guard param.appendTextValue(to: &bytes) else {
                offsets.append(-1)
                continue
            }
            let nul = bytes.withUnsafeBufferPointer { LibPQ.containsNUL(UnsafeBufferPointer(rebasing: $0[start...])) }
            if nul { throw .nulInText("parameter $\(i + 1)") }
            offsets.append(start)
            bytes.append(0)
        }
    }

    /// Calls `body` with the `paramTypes` pointer.
    func withTypes<R>(_ body: (UnsafePointer<UInt32>?) -> R) -> R {
        types.withUnsafeBufferPointer { body($0.baseAddress) }
    }

    /// Calls `body` with the `paramValues` pointer (NULL entries for SQL NULL).
    func withValues<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(1, offsets.count)) { pointers in
                    for (i, offset) in offsets.enumerated() {
                        pointers[i] = offset < 0 ? nil : chars.baseAddress! + offset
                    }
                    return body(UnsafePointer(pointers.baseAddress))
                }
            }
        }
    }
}
