import ParleyLog
import ParleyNet

/// An HTTP/1.1 server on `TCPServer`: keep-alive, pipelining (responses in request order),
/// chunked bodies, `Expect: 100-continue`, HEAD, deadlines against slow clients, upgrades.
///
/// ```swift
/// let server = HTTPServer(group: group, configuration: .init(port: 8080), router: router, observer: metrics)
/// try server.start()
/// // SIGTERM: server.quiesce(), wait up to the shutdown timeout, then server.closeAll()
/// ```
public final class HTTPServer: Sendable {
    /// Listening, limits and timeouts; defaults match `parley serve`'s.
    public struct Configuration: Sendable {
        public var host: String
        /// 0 picks a free port (see `HTTPServer.port`).
        public var port: Int
        public var backlog: Int
        /// Connections past this are accepted and closed at once.
        public var maxConnections: Int
        /// Queued output per connection; a client that reads slower is disconnected.
        public var maxOutboundBytes: Int
        /// Head, header-count, body and chunk-extension limits (431/413/400).
        public var limits: HTTPParserLimits
        /// A keep-alive connection with no request in progress is closed after this.
        public var idleTimeout: Duration
        /// A request head must be complete this long after its first byte (slowloris guard), else 408 and close.
        public var headerTimeout: Duration
        /// A request body must be complete this long after its head, else 408 and close.
        public var bodyTimeout: Duration
        /// Requests read ahead of their responses; past this the server stops reading until responses are written.
        public var maxPipelinedRequests: Int
        /// Output queued on a connection past which the server stops reading new requests until it drains.
        public var outboundHighWater: Int
        /// A connection whose queued output the client takes none of for this long is closed (slow reader); zero: never.
        public var slowReaderTimeout: Duration
        /// TLS for the listener: on `port`, or on `tlsPort` when that is set (`port` then stays plain).
        public var tls: TLSServerContext?
        /// A second listener for TLS, beside the plain one on `port` (0 picks a free port).
        public var tlsPort: Int?

        public init(
            host: String = "0.0.0.0", port: Int = 8080, backlog: Int = 1024, maxConnections: Int = 100_000,
            maxOutboundBytes: Int = 4 << 20, limits: HTTPParserLimits = HTTPParserLimits(),
            idleTimeout: Duration = .seconds(60), headerTimeout: Duration = .seconds(10), bodyTimeout: Duration = .seconds(30),
            maxPipelinedRequests: Int = 16, outboundHighWater: Int = 256 << 10, slowReaderTimeout: Duration = .seconds(30),
            tls: TLSServerContext? = nil, tlsPort: Int? = nil
        ) {
            precondition(maxPipelinedRequests > 0, "maxPipelinedRequests must be positive")
            self.host = host
            self.port = port
            self.backlog = backlog
            self.maxConnections = maxConnections
            self.maxOutboundBytes = maxOutboundBytes
            self.limits = limits
            self.idleTimeout = idleTimeout
            self.headerTimeout = headerTimeout
            self.bodyTimeout = bodyTimeout
            self.maxPipelinedRequests = maxPipelinedRequests
            self.outboundHighWater = outboundHighWater
            self.slowReaderTimeout = slowReaderTimeout
            self.tls = tls
            self.tlsPort = tlsPort
        }
    }

    private let core: HTTPServerCore
    private let tcp: TCPServer
    /// The TLS listener when TLS runs on its own port beside the plain one.
    private let tlsListener: TCPServer?

    /// A server for the routes of `routes`.
    public init(
        group: EventLoopGroup, configuration: Configuration = Configuration(), routes: RouteTable,
        observer: (any HTTPServerObserver)? = nil, logger: Logger = Logger(label: "http")
    ) {
        let core = HTTPServerCore(
            configuration: configuration, routes: routes, observer: observer, logger: logger,
            loops: group.loops.map { HTTPLoopContext(loop: $0, observer: observer?.makeLoopObserver(loop: $0)) })
        self.core = core
        var options = TCPServer.Options(
            host: configuration.host, port: configuration.port, backlog: configuration.backlog,
            maxConnections: configuration.maxConnections, maxOutboundBytes: configuration.maxOutboundBytes,
            slowReaderTimeout: configuration.slowReaderTimeout)
        let makeHandler: @Sendable (Connection) -> any ConnectionHandler = { connection in
            HTTPServerConnection(connection: connection, core: core, context: core.loops[connection.loop.index])
        }
        if let tls = configuration.tls, let tlsPort = configuration.tlsPort {
            var secure = options
            secure.port = tlsPort
            secure.tls = tls
            tlsListener = TCPServer(group: group, options: secure, makeHandler: makeHandler)
        } else {
            options.tls = configuration.tls
            tlsListener = nil
        }
        tcp = TCPServer(group: group, options: options, makeHandler: makeHandler)
    }

    /// A server for the routes registered on `router` so far.
    public convenience init(
        group: EventLoopGroup, configuration: Configuration = Configuration(), router: Router,
        observer: (any HTTPServerObserver)? = nil, logger: Logger = Logger(label: "http")
    ) {
        self.init(group: group, configuration: configuration, routes: router.makeTable(), observer: observer, logger: logger)
    }

    /// Starts each loop's deadline and `Date` ticker, then binds and listens on every loop.
    public func start() throws(NetError) {
        let interval = core.tickInterval
        for context in core.loops {
            context.loop.execute { context.start(interval: interval) }
        }
        try tcp.start()
        try tlsListener?.start()
    }

    /// The bound port (of the TLS listener too when TLS has no port of its own).
    public var port: Int { tcp.port }

    /// The bound port of TLS connections (`port` when TLS shares it), nil without TLS.
    public var tlsPort: Int? { tlsListener?.port ?? (core.configuration.tls == nil ? nil : tcp.port) }

    /// Connections open now.
    public func openConnections() -> Int { tcp.openConnections() + (tlsListener?.openConnections() ?? 0) }

    /// Stops accepting; idle connections close now, busy ones after their in-flight requests
    /// (the last response says `Connection: close`).
    public func quiesce() {
        tcp.quiesce()
        tlsListener?.quiesce()
    }

    /// Closes every connection now and stops the loops' tickers.
    public func closeAll() {
        tcp.closeAll()
        tlsListener?.closeAll()
        for context in core.loops {
            context.loop.execute { context.stop() }
        }
    }
}

/// What every connection of a server shares; immutable.
final class HTTPServerCore: Sendable {
    let configuration: HTTPServer.Configuration
    let routes: RouteTable
    let observer: (any HTTPServerObserver)?
    let hasObserver: Bool
    let logger: Logger
    let loops: [HTTPLoopContext]
    /// The parser's limits: bodies are limited per route by the connection, not by the parser.
    let parserLimits: HTTPParserLimits
    /// The answer to a body over its limit on a route without its own.
    let bodyTooLarge: HTTPResponse
    let idleTimeout: UInt64
    let headerTimeout: UInt64
    let bodyTimeout: UInt64
    /// How often each loop checks deadlines and refreshes `Date` (at most 250 ms).
    let tickInterval: Duration
    /// What each connection's state machine is configured with.
    let machineConfiguration: HTTPServerConnectionConfiguration

    init(configuration: HTTPServer.Configuration, routes: RouteTable, observer: (any HTTPServerObserver)?, logger: Logger, loops: [HTTPLoopContext]) {
        self.configuration = configuration
        self.routes = routes
        self.observer = observer
        self.hasObserver = observer != nil
        self.logger = logger
        self.loops = loops
        var parserLimits = configuration.limits
        parserLimits.maxBodyBytes = Int.max >> 2
        self.parserLimits = parserLimits
        bodyTooLarge = .plain(HTTPParserError.bodyTooLarge.status, HTTPParserError.bodyTooLarge.description)
        idleTimeout = configuration.idleTimeout.nanoseconds
        headerTimeout = configuration.headerTimeout.nanoseconds
        bodyTimeout = configuration.bodyTimeout.nanoseconds
        let shortest = min(idleTimeout, headerTimeout, bodyTimeout)
        tickInterval = .nanoseconds(Int64(min(max(shortest / 8, 10_000_000), 250_000_000)))
        machineConfiguration = HTTPServerConnectionConfiguration(
            routes: routes, parserLimits: parserLimits, maxBodyBytes: configuration.limits.maxBodyBytes, bodyTooLarge: bodyTooLarge,
            maxPipelinedRequests: configuration.maxPipelinedRequests, outboundHighWater: configuration.outboundHighWater,
            streamLowWater: HTTPServerConnection.streamLowWater, idleTimeout: idleTimeout, headerTimeout: headerTimeout,
            bodyTimeout: bodyTimeout)
    }

    /// The response for an error a handler threw.
    func response(for error: any Error, context: RequestContext) -> HTTPResponse {
        if let error = error as? any HTTPResponseError { return error.response() }
        context.logger.error("handler failed", [("route", context.route ?? "-"), ("error", "\(error)")])
        return .plain(.internalServerError)
    }
}

extension Duration {
    /// Whole nanoseconds, clamped at 0.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }
}

/// State one event loop shares among its HTTP connections: the `Date` line, the buffer response
/// heads are serialized into, the observer's recorder, the request-id counter and the deadline sweep.
///
/// Owned by `loop`'s thread (`@unchecked Sendable` only so the server can hold one per loop);
/// every method checks that in debug builds.
final class HTTPLoopContext: @unchecked Sendable {
    let loop: EventLoop
    /// The server observer's recorder for this loop.
    let observer: (any HTTPLoopObserver)?
    var dateCache = HTTPDateCache()
    /// Every response is serialized here (head and a small body) and sent from here; only what
    /// the socket does not take at once is copied into the connection's queue.
    let scratch: UnsafeMutableRawPointer
    static let scratchCapacity = 32 << 10
    private var connections: [ObjectIdentifier: HTTPServerConnection] = [:]
    private var nextRequestNumber: UInt64 = 0
    /// The serialized form of the last response fields that came twice in a row.
    private var cachedFields: SerializedFields?
    /// The fields of the last response written without `cachedFields`, kept alive so that seeing
    /// them again is an identity test (see `HTTPHeaders.sharesStorage`).
    private var lastFields: HTTPHeaders?
    private var ticker: TimerID?
    private var running = false

    init(loop: EventLoop, observer: (any HTTPLoopObserver)?) {
        self.loop = loop
        self.observer = observer
        scratch = .allocate(byteCount: HTTPLoopContext.scratchCapacity, alignment: 16)
    }

    deinit {
        scratch.deallocate()
    }

    /// The serialized form of `headers`: cached when they are the very fields of the last response
    /// (a handler's shared static fields), nil for fields seen once, which are written directly.
    func serializedFields(of headers: HTTPHeaders, switching: Bool) -> SerializedFields? {
        if let cachedFields, cachedFields.serves(headers, switching: switching) { return cachedFields }
        guard let lastFields, lastFields.sharesStorage(with: headers) else {
            lastFields = headers
            return nil
        }
        let serialized = SerializedFields(headers, switching: switching)
        cachedFields = serialized
        self.lastFields = nil
        return serialized
    }

    func start(interval: Duration) {
        loop.preconditionInEventLoop()
        guard !running else { return }
        running = true
        tick(interval: interval)
    }

    func stop() {
        loop.preconditionInEventLoop()
        running = false
        if let ticker { loop.cancel(ticker) }
        ticker = nil
    }

    private func tick(interval: Duration) {
        dateCache.refresh()
        let now = EventLoop.monotonicNanoseconds()
        for connection in connections.values {
            connection.checkDeadline(now: now)
        }
        guard running else { return }
        ticker = loop.schedule(after: interval) { [weak self] in
            self?.tick(interval: interval)
        }
    }

    func register(_ connection: HTTPServerConnection) {
        assert(loop.inEventLoop)
        connections[ObjectIdentifier(connection)] = connection
    }

    func unregister(_ connection: HTTPServerConnection) {
        assert(loop.inEventLoop)
        connections[ObjectIdentifier(connection)] = nil
    }

    func nextRequestID() -> UInt64 {
        nextRequestNumber &+= 1
        return UInt64(truncatingIfNeeded: loop.index) << 48 | (nextRequestNumber & 0xFFFF_FFFF_FFFF)
    }
}
