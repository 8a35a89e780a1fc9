/// A response: status, header fields and the body (bytes, or a stream pulled as the socket drains).
///
/// The server adds `Date`, `Content-Length` (or `Transfer-Encoding: chunked` for a stream of
/// unknown length) and `Connection` when it writes the response and ignores those if a handler
/// set them, so framing is always its own.
/// A response kept in a `static let` is shared, not copied, by every request that returns it.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: HTTPResponseBody

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: HTTPResponseBody) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is `body`, complete.
    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.init(status: status, headers: headers, body: .bytes(body))
    }

    /// The body's bytes when it is not a stream (empty for a stream).
    public var bodyBytes: [UInt8] { body.bytes ?? [] }

    /// A response with a UTF-8 text body (the caller sets Content-Type if it matters).
    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: String) {
        self.init(status: status, headers: headers, body: Array(body.utf8))
    }

    /// A bodiless response with a short plain-text reason, as the server sends for its own errors.
    public static func plain(_ status: HTTPStatus, _ text: String? = nil) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; charset=utf-8")
        return HTTPResponse(status: status, headers: headers, body: Array((text ?? status.reasonPhrase).utf8) + [0x0A])
    }
}

/// An error that knows the response it should become (other errors thrown by handlers become 500).
public protocol HTTPResponseError: Error {
    func response() -> HTTPResponse
}

/// A thrown status with an optional plain-text message.
public struct HTTPError: HTTPResponseError, Equatable {
    public var status: HTTPStatus
    public var message: String?

    public init(_ status: HTTPStatus, message: String? = nil) {
        self.status = status
        self.message = message
    }

    public func response() -> HTTPResponse { .plain(status, message) }
}
