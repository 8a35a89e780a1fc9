/// A request: head, body bytes (or, on a streaming route, the body stream) and the path
/// parameters the router matched.
public struct HTTPRequest: Sendable {
    public var head: HTTPRequestHead
    /// The whole body on a buffered route; empty on a streaming route.
    public var body: [UInt8]
    /// Values of the route's `:name` segments and `*` remainder.
    public var parameters: PathParameters
    /// The body as it arrives, on a route registered with `body: .streamed`; nil otherwise.
    public var bodyStream: HTTPRequestBodyStream?

    public init(
        head: HTTPRequestHead, body: [UInt8] = [], parameters: PathParameters = PathParameters(), bodyStream: HTTPRequestBodyStream? = nil
    ) {
        self.head = head
        self.body = body
        self.parameters = parameters
        self.bodyStream = bodyStream
    }

    public var method: HTTPMethod { head.method }
    /// The percent-decoded path.
    public var path: String { head.path }
    public var headers: HTTPHeaders { head.headers }
    /// The first value of query parameter `name`, decoded.
    public func queryParameter(_ name: String) -> String? { head.queryParameter(name) }
}

extension HTTPRequest {
    /// The arrays holding the head's bytes and fields, for the parser to reuse; the request is used up.
    consuming func takeHeadMemory() -> (bytes: [UInt8], fields: [HTTPHeaders.Field]) {
        (head.raw, head.headers.fields)
    }
}

/// The values a route pattern captured, in pattern order.
public struct PathParameters: Sendable, Equatable, Sequence {
    public private(set) var pairs: [(name: String, value: String)]

    public init() { pairs = [] }

    public init(_ pairs: [(name: String, value: String)]) { self.pairs = pairs }

    /// The value of `:name`, or of the trailing wildcard for `"*"`.
    public subscript(name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    public var count: Int { pairs.count }
    public var isEmpty: Bool { pairs.isEmpty }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { pairs.makeIterator() }

    mutating func append(_ name: String, _ value: String) { pairs.append((name, value)) }
    mutating func removeLast() { pairs.removeLast() }

    public static func == (lhs: PathParameters, rhs: PathParameters) -> Bool {
        lhs.pairs.elementsEqual(rhs.pairs) { $0.name == $1.name && $0.value == $1.value }
    }
}
