import ParleyLog

/// Per-request information handed to handlers and middleware next to the request.
public struct RequestContext: Sendable {
    /// Values of the route's `:name` segments and `*` remainder (same as `HTTPRequest.parameters`).
    public var parameters: PathParameters
    /// The matched route pattern (`/users/:id`), or nil when no route matched.
    public let route: String?
    /// A number unique within the process, for logs.
    public let requestID: UInt64
    /// The peer's address as `ip:port`.
    public let remoteAddress: String
    /// A logger carrying the request id.
    public var logger: Logger

    public init(parameters: PathParameters = PathParameters(), route: String? = nil, requestID: UInt64 = 0, remoteAddress: String = "", logger: Logger = Logger(label: "http")) {
        self.parameters = parameters
        self.route = route
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.logger = logger
    }
}
