import ParleyNet

/// The body of a response: bytes known in full, a stream the server pulls as the socket drains,
/// or a region of an open file.
public enum HTTPResponseBody: Sendable {
    case bytes([UInt8])
    /// Pulled chunk by chunk as the socket drains; nil ends it. length nil → chunked encoding.
    case stream(length: Int?, next: @Sendable () async throws -> [UInt8]?)
    /// Sent by the kernel with `sendfile(2)` as the socket drains; over TLS (which `sendfile`
    /// cannot encrypt) the same bytes are pulled from `fallback` as a `.stream`.
    case file(FileRegion, fallback: @Sendable () async throws -> [UInt8]?)

    /// The body's length when known in advance (a stream without a length: nil).
    public var length: Int? {
        switch self {
        case .bytes(let bytes): bytes.count
        case .stream(let length, _): length
        case .file(let region, _): region.range.count
        }
    }

    /// The bytes of a `.bytes` body; nil for a stream.
    public var bytes: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    /// The whole body: a stream is read to its end, at most `limit` bytes (past it `HTTPBodyTooLarge`).
    public func collect(upTo limit: Int = .max) async throws -> [UInt8] {
        switch self {
        case .bytes(let bytes):
            guard bytes.count <= limit else { throw HTTPBodyTooLarge(limit: limit) }
            return bytes
        case .stream(_, let next), .file(_, let next):
            var collected: [UInt8] = []
            while let chunk = try await next() {
                guard chunk.count <= limit - collected.count else { throw HTTPBodyTooLarge(limit: limit) }
                collected.append(contentsOf: chunk)
            }
            return collected
        }
    }
}

/// A body longer than the limit it was collected with.
public struct HTTPBodyTooLarge: Error, Equatable {
    public let limit: Int
}
