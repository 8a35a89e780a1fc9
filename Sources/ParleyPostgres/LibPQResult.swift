import CLibPQ

/// One libpq result and its columns, cleared when the last reference goes: rows read their
/// cells from it in place instead of copying every value into a `String` up front.
///
/// Rows, a row and its cells share this one object, so copying any of them costs one
/// reference count. libpq results are read-only once made, so sharing one between threads is safe.
@usableFromInline
final class LibPQResult: @unchecked Sendable {
    /// nil for a result made without libpq (an empty query).
    @usableFromInline let pointer: OpaquePointer?
    let columns: PostgresColumns
    let rowCount: Int

    /// Takes ownership of `pointer` (from `PQgetResult` or `PQexec*`).
    init(_ pointer: OpaquePointer?, columns: PostgresColumns) {
        self.pointer = pointer
        self.columns = columns
        rowCount = pointer.map { Int(PQntuples($0)) } ?? 0
    }

    deinit {
        if let pointer { PQclear(pointer) }
    }
}
