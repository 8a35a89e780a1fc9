import ParleyHTTP

/// Where Parse files live: a local directory (`DiskFileStorage`) or S3-compatible storage.
public protocol FileStorage: Sendable {
    /// Stores what `body` yields under `name`, refusing more than `maxBytes`; returns the size.
    /// Nothing is visible under `name` until the whole body is stored.
    func store(_ name: FileName, contentType: String, maxBytes: Int, body: FileBodySource) async throws(FileError) -> Int

    /// The stored file's size, modification time and validator, nil if there is none.
    func metadata(_ name: FileName) async throws(FileError) -> FileMetadata?

    /// The bytes of `range` (whole file if nil), pulled in bounded chunks.
    func read(_ name: FileName, metadata: FileMetadata, range: Range<Int>) -> FileBodySource

    /// Deletes the file (deleting a missing file is `.notFound`).
    func delete(_ name: FileName) async throws(FileError)

    /// The response body of a download of `range`: by default `read` as a stream.
    func responseBody(_ name: FileName, metadata: FileMetadata, range: Range<Int>) async throws(FileError) -> HTTPResponseBody
}

extension FileStorage {
    public func responseBody(_ name: FileName, metadata: FileMetadata, range: Range<Int>) async throws(FileError) -> HTTPResponseBody {
        .stream(length: range.count, next: read(name, metadata: metadata, range: range))
    }
}

/// A body pulled chunk by chunk; nil when it ends.
public typealias FileBodySource = @Sendable () async throws -> [UInt8]?

/// What a download needs before the first byte.
public struct FileMetadata: Sendable, Equatable {
    public var size: Int
    /// Seconds since the epoch.
    public var modified: Int64
    /// A strong validator, quoted (`"…"`), for `ETag` and `If-None-Match`.
    public var etag: String

    public init(size: Int, modified: Int64, etag: String) {
        self.size = size
        self.modified = modified
        self.etag = etag
    }
}
