import ParleyLog
import ParleyNet

/// Per-request information handed to handlers and middleware next to the request.
public struct RequestContext: Sendable {
    /// Values of the route's `:name` segments and `*` remainder (same as `HTTPRequest.parameters`).
    public var parameters: PathParameters
    /// The matched route pattern (`/users/:id`), or nil when no route matched.
    public var route: String? { hasRoute ? routePattern : nil }
    /// A number unique within the process (loop index in the top 16 bits), for logs.
    public let requestID: UInt64
    /// The peer's address as `ip:port`.
    public let remoteAddress: String
    /// The event loop of the connection: async handlers run on it, and loop-owned resources
    /// (database connections, caches) for this request are the ones of this loop.
    public let loop: EventLoop
    private let baseLogger: Logger
    // No optional structs: a context is made and destroyed per request, and optional payloads
    // that are not single references are destroyed through slower generic code.
    private let routePattern: String
    private let hasRoute: Bool
    private var customLogger: LoggerOverride?

    private final class LoggerOverride: Sendable {
        let logger: Logger
        init(_ logger: Logger) { self.logger = logger }
    }

    public init(
        parameters: PathParameters = PathParameters(), route: String? = nil, requestID: UInt64 = 0,
        remoteAddress: String = "", loop: EventLoop, logger: Logger = Logger(label: "http")
    ) {
        self.parameters = parameters
        self.routePattern = route ?? ""
        self.hasRoute = route != nil
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.loop = loop
        self.baseLogger = logger
    }

    /// A logger carrying `request=<id>`; built on first use so requests that do not log pay nothing.
    public var logger: Logger {
        get { customLogger?.logger ?? baseLogger.with("request", String(requestID)) }
        set { customLogger = LoggerOverride(newValue) }
    }
}
