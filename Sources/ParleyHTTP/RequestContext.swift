import ParleyLog
import ParleyNet

/// Per-request information handed to handlers and middleware next to the request.
public struct RequestContext: Sendable {
    /// Values of the route's `:name` segments and `*` remainder (same as `HTTPRequest.parameters`).
    public var parameters: PathParameters
    /// The matched route pattern (`/users/:id`), or nil when no route matched.
    public let route: String?
    /// A number unique within the process (loop index in the top 16 bits), for logs.
    public let requestID: UInt64
    /// The peer's address as `ip:port`.
    public let remoteAddress: String
    /// The event loop of the connection: async handlers run on it, and loop-owned resources
    /// (database connections, caches) for this request are the ones of this loop.
    public let loop: EventLoop
    private let baseLogger: Logger
    private var customLogger: Logger?

    public init(
        parameters: PathParameters = PathParameters(), route: String? = nil, requestID: UInt64 = 0,
        remoteAddress: String = "", loop: EventLoop, logger: Logger = Logger(label: "http")
    ) {
        self.parameters = parameters
        self.route = route
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.loop = loop
        self.baseLogger = logger
    }

    /// A logger carrying `request=<id>`; built on first use so requests that do not log pay nothing.
    public var logger: Logger {
        get { customLogger ?? baseLogger.with("request", String(requestID)) }
        set { customLogger = newValue }
    }
}
