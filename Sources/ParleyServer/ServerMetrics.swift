import ParleyHTTP
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import Synchronization

/// The process's Prometheus metrics: HTTP traffic, connections, database pool, loop lag.
///
/// The HTTP server records through one `RequestRecorder` per event loop: each keeps its own
/// shard of the request counters and of the latency histogram, so recording takes no shared lock
/// and touches no cache line another loop writes; `/metrics` sums the shards.
public final class ServerMetrics: Sendable {
    public let registry = MetricsRegistry()
    private let latency: Histogram
    private let requestCounters = Mutex<[RequestKey: Counter]>([:])

    private struct RequestKey: Hashable {
        let route: String?
        let statusClass: Int
    }

    static let requestsName = "parley_http_requests_total"
    static let requestsHelp = "HTTP requests by route and status class."
    static let latencyName = "parley_http_request_duration_seconds"
    static let latencyHelp = "HTTP request latency."
    /// The shard used by `recordRequest` (callers off the event loops).
    static let sharedShard = -1

    public init() {
        latency = registry.histogram(ServerMetrics.latencyName, help: ServerMetrics.latencyHelp, shard: ServerMetrics.sharedShard)
    }

    /// Counts one finished request under its route pattern and status class (any thread).
    public func recordRequest(route: String?, status: Int, seconds: Double) {
        let key = RequestKey(route: route, statusClass: status / 100)
        let counter = requestCounters.withLock { cache in
            if let known = cache[key] { return known }
            let made = requestCounter(route: route, statusClass: key.statusClass, shard: ServerMetrics.sharedShard)
            cache[key] = made
            return made
        }
        counter.increment()
        latency.observe(seconds)
    }

    func requestCounter(route: String?, statusClass: Int, shard: Int) -> Counter {
        registry.counter(
            ServerMetrics.requestsName, help: ServerMetrics.requestsHelp,
            labels: [("route", route ?? "unmatched"), ("status", "\(statusClass)xx")], shard: shard)
    }

    /// Adds gauges read at scrape time from the server, the database pool and the loops.
    public func watch(openConnections: @escaping @Sendable () -> Int, database: PostgresClient, group: EventLoopGroup) {
        database.registerMetrics(in: registry)
        registry.addCollector {
            var samples: [MetricsRegistry.Sample] = [
                .init(name: "parley_open_connections", help: "Open client connections.", value: Double(openConnections())),
            ]
            for loop in group.loops {
                samples.append(.init(name: "parley_event_loop_lag_seconds", help: "How late the loop's heartbeat timer fired.",
                                     labels: [("loop", "\(loop.index)")], value: Double(loop.lagNanoseconds) / 1e9))
            }
            return samples
        }
    }
}

extension ServerMetrics: HTTPServerObserver {
    public func requestCompleted(method: HTTPMethod?, route: String?, status: HTTPStatus, duration: Duration) {
        let (seconds, attoseconds) = duration.components
        recordRequest(route: route, status: status.code, seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }

    public func makeLoopObserver(loop: EventLoop) -> any HTTPLoopObserver {
        RequestRecorder(metrics: self, loop: loop)
    }
}

/// One event loop's request metrics: counters looked up by route index, no locks.
///
/// Owned by `loop`'s thread: the HTTP server calls it only there (checked in debug builds).
final class RequestRecorder: HTTPLoopObserver {
    private let metrics: ServerMetrics
    private let loop: EventLoop
    private let latency: Histogram
    // Loop-confined, so the runtime exclusivity checks would only cost time.
    /// `Route.index * statusSlots + status class`, filled on first use.
    @exclusivity(unchecked) private var routeCounters: [Counter?] = []
    @exclusivity(unchecked) private var unmatchedCounters: [Counter?] = Array(repeating: nil, count: RequestRecorder.statusSlots)

    private static let statusSlots = 10

    init(metrics: ServerMetrics, loop: EventLoop) {
        self.metrics = metrics
        self.loop = loop
        latency = metrics.registry.histogram(ServerMetrics.latencyName, help: ServerMetrics.latencyHelp, shard: loop.index)
    }

    func requestCompleted(method: HTTPMethod?, route: Route?, status: HTTPStatus, nanoseconds: UInt64) {
        assert(loop.inEventLoop, "RequestRecorder used off its loop")
        let statusClass = min(max(status.code / 100, 0), RequestRecorder.statusSlots - 1)
        counter(route: route, statusClass: statusClass).increment()
        latency.observe(Double(nanoseconds) / 1e9)
    }

    private func counter(route: Route?, statusClass: Int) -> Counter {
        guard let route else {
            if let known = unmatchedCounters[statusClass] { return known }
            let made = metrics.requestCounter(route: nil, statusClass: statusClass, shard: loop.index)
            unmatchedCounters[statusClass] = made
            return made
        }
        let slot = route.index * RequestRecorder.statusSlots + statusClass
        if slot < routeCounters.count, let known = routeCounters[slot] { return known }
        if slot >= routeCounters.count {
            routeCounters.append(contentsOf: repeatElement(nil, count: slot + RequestRecorder.statusSlots - routeCounters.count))
        }
        let made = metrics.requestCounter(route: route.pattern, statusClass: statusClass, shard: loop.index)
        routeCounters[slot] = made
        return made
    }
}
