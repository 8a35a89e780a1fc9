/// A request for `HTTPClient`: method, URL, header fields and the whole body.
///
/// The client sets `Host`, `Content-Length` and `Connection` itself (fields of those names given
/// here are ignored), so framing is always its own.
public struct HTTPClientRequest: Sendable {
    public var method: HTTPMethod
    public var url: HTTPClientURL
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Send the request again, once, on a new connection when a kept-alive connection closes
    /// before any byte of the response (the server timed it out as the request went out).
    /// The server may have received the first copy: leave it off where a repeat does harm.
    public var retryOnStaleConnection: Bool

    public init(method: HTTPMethod = .get, url: HTTPClientURL, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
                retryOnStaleConnection: Bool = true) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.retryOnStaleConnection = retryOnStaleConnection
    }

    /// The request's bytes on the wire.
    func serialized(userAgent: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + url.target.utf8.count + headers.storage.count + body.count)
        out.append(contentsOf: method.rawValue.utf8)
        out.append(.space)
        out.append(contentsOf: url.target.utf8)
        out.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        out.append(contentsOf: url.authority.utf8)
        out.append(contentsOf: "\r\n".utf8)
        if let userAgent, !headers.contains("user-agent") {
            out.append(contentsOf: "User-Agent: ".utf8)
            out.append(contentsOf: userAgent.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        for index in 0..<headers.count {
            if headers.nameIs(index, "host") || headers.nameIs(index, "content-length") || headers.nameIs(index, "connection")
                || headers.nameIs(index, "transfer-encoding") {
                continue
            }
            let field = headers.fields[index]
            out.append(contentsOf: headers.storage[Int(field.nameStart)..<Int(field.nameStart + field.nameLength)])
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: headers.storage[Int(field.valueStart)..<Int(field.valueStart + field.valueLength)])
            out.append(contentsOf: "\r\n".utf8)
        }
        if !body.isEmpty || method == .post || method == .put || method == .patch {
            out.append(contentsOf: "Content-Length: ".utf8)
            out.append(contentsOf: String(body.count).utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        out.append(contentsOf: "\r\n".utf8)
        out.append(contentsOf: body)
        return out
    }
}

/// A complete response received by `HTTPClient`.
public struct HTTPClientResponse: Sendable {
    public var head: HTTPResponseHead
    public var body: [UInt8]

    public init(head: HTTPResponseHead, body: [UInt8] = []) {
        self.head = head
        self.body = body
    }

    public var status: HTTPStatus { head.status }
    public var headers: HTTPHeaders { head.headers }
}
