/// How a route receives a request body (Content-Length or chunked alike).
public enum HTTPBodyMode: Sendable, Equatable {
    /// Collected into `request.body` before the handler runs; over `limit` bytes (nil: the
    /// server's `maxBodyBytes`) the request gets 413 and the connection closes.
    case buffered(limit: Int? = nil)
    /// Handed to the handler as it arrives (`request.bodyStream`); the handler starts once the
    /// head is read. Over `limit` bytes in all (nil: `maxBodyBytes`), 413 before any body byte
    /// when the Content-Length says so, else `bodyStream.next()` throws and the connection closes.
    case streamed(limit: Int? = nil)
}
