import CLibPQ

/// One libpq result, cleared when the last reference goes: rows read their cells from it in
/// place instead of copying every value into a `String` up front.
///
/// libpq results are read-only once made, so sharing one between threads is safe.
final class LibPQResult: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer` (from `PQgetResult` or `PQexec*`).
    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        PQclear(pointer)
    }
}
