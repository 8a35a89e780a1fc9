/// Limits and settings of Cloud Code webhooks (the `--webhook-*` options).
public struct CloudConfiguration: Sendable {
    /// Sent as `X-Parse-Webhook-Key` with every call (nil: none).
    public var webhookKey: String?
    /// Deadline of a function or trigger call.
    public var timeout: Duration
    /// Deadline of a job call (jobs run longer).
    public var jobTimeout: Duration
    /// Largest webhook answer read; a larger one fails the call.
    public var maxAnswerBytes: Int
    /// Kept-alive connections per webhook host per event loop.
    public var connectionsPerHost: Int
    /// Calls waiting for a connection per webhook host per loop; more fail at once.
    public var queuePerHost: Int
    /// After-trigger and job deliveries in flight per node.
    public var concurrency: Int
    /// Attempts of a delivery before it is dead.
    public var maxAttempts: Int
    public var backoffBase: Duration
    public var backoffMax: Duration
    /// How often the worker looks for due deliveries when nothing woke it.
    public var pollInterval: Duration
    /// After-trigger deliveries kept (pending and dead); beyond, the oldest are dropped.
    public var maxDeliveries: Int
    /// A delivery still failing when older than this is dead, whatever its attempts.
    public var deliveryMaxAge: Duration
    /// Deadline of a `beforeMessage` or `beforeCall` call (the sender waits for it).
    public var trafficTimeout: Duration
    /// Whether a `beforeMessage` / `beforeCall` webhook that cannot be called lets traffic through.
    public var trafficFailOpen: Bool

    public init(webhookKey: String? = nil, timeout: Duration = .seconds(10), jobTimeout: Duration = .seconds(900), maxAnswerBytes: Int = 1 << 20,
                connectionsPerHost: Int = 16, queuePerHost: Int = 256, concurrency: Int = 16, maxAttempts: Int = 8,
                backoffBase: Duration = .seconds(1), backoffMax: Duration = .seconds(300), pollInterval: Duration = .seconds(1),
                maxDeliveries: Int = 100_000, deliveryMaxAge: Duration = .seconds(86_400),
                trafficTimeout: Duration = .seconds(3), trafficFailOpen: Bool = false) {
        self.webhookKey = webhookKey
        self.timeout = timeout
        self.jobTimeout = jobTimeout
        self.maxAnswerBytes = maxAnswerBytes
        self.connectionsPerHost = connectionsPerHost
        self.queuePerHost = queuePerHost
        self.concurrency = concurrency
        self.maxAttempts = maxAttempts
        self.backoffBase = backoffBase
        self.backoffMax = backoffMax
        self.pollInterval = pollInterval
        self.maxDeliveries = max(1, maxDeliveries)
        self.deliveryMaxAge = deliveryMaxAge
        self.trafficTimeout = trafficTimeout
        self.trafficFailOpen = trafficFailOpen
    }
}
