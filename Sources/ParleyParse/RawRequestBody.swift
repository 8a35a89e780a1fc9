import ParleyFiles
import ParleyHTTP
import Synchronization

/// The body of a raw-body endpoint as it arrives: its declared type and length and a source that
/// yields it chunk by chunk (the connection reads no further ahead than its high-water mark).
struct RawRequestBody: Sendable {
    var contentType: String?
    /// `Content-Length` when the client sent one (a chunked body has none).
    var declaredLength: Int?
    var next: @Sendable () async throws -> [UInt8]?

    init(_ request: HTTPRequest) {
        contentType = request.headers["Content-Type"]
        declaredLength = request.headers["Content-Length"].flatMap { Int($0) }
        if let stream = request.bodyStream {
            next = {
                do {
                    return try await stream.next()
                } catch HTTPRequestBodyError.tooLarge(let limit) {
                    throw FileError.tooLarge(maxBytes: limit)
                }
            }
        } else {
            let chunk = BufferedChunk(request.body)
            next = { chunk.take() }
        }
    }
}

/// A whole body handed out once (a raw-body endpoint reached without streaming: the `_method` form).
private final class BufferedChunk: Sendable {
    private let bytes: Mutex<[UInt8]?>

    init(_ bytes: [UInt8]) { self.bytes = Mutex(bytes) }

    func take() -> [UInt8]? { bytes.withLock { value in defer { value = nil }; return value } }
}
