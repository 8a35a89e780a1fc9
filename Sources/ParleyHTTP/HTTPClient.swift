import ParleyNet
import Synchronization

/// An HTTP/1.1 client on the event loops: kept-alive connections pooled per loop and origin,
/// a deadline per request, bounded responses, bounded queues.
///
/// Callable from any task. A request made from a task running on one of the group's loops uses
/// that loop's pool with no thread hop; otherwise a loop is picked round robin. Host names are
/// resolved on `blockingPool` (cached for `resolveCacheTTL`); numeric hosts need no pool.
public final class HTTPClient: Sendable {
    /// Connection, time and size limits.
    public struct Configuration: Sendable {
        /// Time allowed for the TCP connect.
        public var connectTimeout: Duration
        /// Default deadline of a request (waiting for a connection, connecting, sending and
        /// receiving the whole response).
        public var requestTimeout: Duration
        /// An idle kept-alive connection is closed after this.
        public var idleTimeout: Duration
        /// Connections per origin per loop.
        public var maxConnectionsPerHost: Int
        /// Requests waiting for a connection per origin per loop; more fail at once.
        public var maxQueuedRequestsPerHost: Int
        /// Bound on a serialized request (head and body).
        public var maxRequestBytes: Int
        /// Bounds on responses.
        public var responseLimits: HTTPResponseParser.Limits
        /// Sent as `User-Agent` unless the request has one (nil: none).
        public var userAgent: String?
        /// How long a resolved host name is reused.
        public var resolveCacheTTL: Duration
        /// PEM CA bundle `https` servers are verified against; nil = the system store.
        public var tlsCAFile: String?

        public init(connectTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(50),
                    maxConnectionsPerHost: Int = 8, maxQueuedRequestsPerHost: Int = 1024, maxRequestBytes: Int = 8 << 20,
                    responseLimits: HTTPResponseParser.Limits = .init(), userAgent: String? = "parley",
                    resolveCacheTTL: Duration = .seconds(60), tlsCAFile: String? = nil) {
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.idleTimeout = idleTimeout
            self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
            self.maxQueuedRequestsPerHost = max(0, maxQueuedRequestsPerHost)
            self.maxRequestBytes = maxRequestBytes
            self.responseLimits = responseLimits
            self.userAgent = userAgent
            self.resolveCacheTTL = resolveCacheTTL
            self.tlsCAFile = tlsCAFile
        }
    }

    public let group: EventLoopGroup
    public let configuration: Configuration
    private let blockingPool: BlockingPool?
    private let loopStates: [LoopState]
    private let resolved = Mutex<[String: (addresses: [SocketAddress], expires: UInt64)]>([:])
    /// The verification context of `https` requests, made on first use (it reads the CA files).
    private let tls: Mutex<Result<TLSContext, TLSError>?> = Mutex(nil)

    public init(group: EventLoopGroup, configuration: Configuration = Configuration(), blockingPool: BlockingPool? = nil) {
        self.group = group
        self.configuration = configuration
        self.blockingPool = blockingPool
        loopStates = group.loops.map { LoopState(loop: $0, configuration: configuration) }
    }

    private func tlsContext() throws(HTTPClientError) -> TLSContext {
        let result = tls.withLock { cached in
            if let cached { return cached }
            let made: Result<TLSContext, TLSError>
            do throws(TLSError) {
                made = .success(try TLSContext.client(caFile: configuration.tlsCAFile))
            } catch {
                made = .failure(error)
            }
            cached = made
            return made
        }
        switch result {
        case .success(let context): return context
        case .failure(let error): throw .tls(error)
        }
    }

    deinit {
        shutdown()
    }

    /// Sends `request` and returns the complete response, or fails within `timeout` (default
    /// `configuration.requestTimeout`).
    public func execute(_ request: HTTPClientRequest, timeout: Duration? = nil) async throws(HTTPClientError) -> HTTPClientResponse {
        let addresses = try await resolve(request.url.host, port: request.url.port)
        let bytes = request.serialized(userAgent: configuration.userAgent)
        guard bytes.count <= configuration.maxRequestBytes else { throw .requestTooLarge }
        let tls = request.url.isSecure ? try tlsContext() : nil
        let loop: EventLoop
        if let current = EventLoop.current, current.index < group.loops.count, group.loops[current.index] === current {
            loop = current
        } else {
            loop = group.next()
        }
        let state = loopStates[loop.index]
        let deadline = timeout ?? configuration.requestTimeout
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<HTTPClientResponse, HTTPClientError>, Never>) in
            loop.execute {
                state.execute(request, bytes: bytes, addresses: addresses, tls: tls, timeout: deadline) { continuation.resume(returning: $0) }
            }
        }
        return try result.get()
    }

    /// Fails queued and in-flight requests with `shutDown` and closes every connection.
    public func shutdown() {
        for state in loopStates {
            state.loop.execute { state.shutdown() }
        }
    }

    /// Idle kept-alive connections summed over the loops (read on each loop; for tests).
    public func idleConnectionCount() async -> Int {
        var total = 0
        for state in loopStates {
            total += await withCheckedContinuation { continuation in
                state.loop.execute { continuation.resume(returning: state.idleCount) }
            }
        }
        return total
    }

    private func resolve(_ host: String, port: Int) async throws(HTTPClientError) -> [SocketAddress] {
        let key = "\(host):\(port)"
        let now = EventLoop.monotonicNanoseconds()
        if let cached = resolved.withLock({ $0[key] }), cached.expires > now { return cached.addresses }
        let addresses: [SocketAddress]
        if let numeric = try? SocketAddress(host: host, port: port) {
            addresses = [numeric]
        } else {
            guard let blockingPool else { throw .unresolvedHost(host) }
            do {
                addresses = try await blockingPool.run { try TCPClient.resolve(host: host, port: port) }
            } catch {
                throw .unresolvedHost(host)
            }
        }
        let ttl = UInt64(max(0, configuration.resolveCacheTTL.components.seconds)) * 1_000_000_000
        resolved.withLock { $0[key] = (addresses, now + ttl) }
        return addresses
    }

    /// One loop's pools by origin. Thread confinement: used only on `loop` (checked); created
    /// off the loop before any use, hence `@unchecked Sendable`.
    private final class LoopState: @unchecked Sendable {
        let loop: EventLoop
        let configuration: Configuration
        private var pools: [String: HTTPClientHostPool] = [:]
        private var isShutDown = false

        init(loop: EventLoop, configuration: Configuration) {
            self.loop = loop
            self.configuration = configuration
        }

        var idleCount: Int { pools.values.reduce(0) { $0 + $1.idleCount } }

        func execute(_ request: HTTPClientRequest, bytes: [UInt8], addresses: [SocketAddress], tls: TLSContext?, timeout: Duration,
                     completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
            loop.preconditionInEventLoop()
            guard !isShutDown else { return completion(.failure(.shutDown)) }
            let key = request.url.origin
            let pool: HTTPClientHostPool
            if let existing = pools[key] {
                pool = existing
                pool.addresses = addresses
            } else {
                pool = HTTPClientHostPool(loop: loop, addresses: addresses, tls: tls.map { ($0, request.url.host) }, configuration: configuration)
                pools[key] = pool
            }
            let exchange = HTTPClientExchange(request: request, bytes: bytes, loop: loop, completion: completion)
            exchange.timer = loop.schedule(after: timeout) { [weak exchange, weak pool] in
                guard let exchange, !exchange.isDone else { return }
                exchange.timer = nil
                let connection = exchange.connection
                exchange.complete(.failure(.timedOut))
                if let connection {
                    connection.abandon()
                } else {
                    pool?.dropWaiting(exchange)
                }
            }
            pool.execute(exchange)
        }

        func shutdown() {
            isShutDown = true
            for pool in pools.values { pool.shutdown() }
        }
    }
}
