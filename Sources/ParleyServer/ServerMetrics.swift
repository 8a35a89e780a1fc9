import ParleyHTTP
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import Synchronization

/// The process's Prometheus metrics: HTTP traffic, connections, database pool, loop lag.
public final class ServerMetrics: Sendable {
    public let registry = MetricsRegistry()
    private let latency: Histogram
    private let requestCounters = Mutex<[RequestKey: Counter]>([:])

    private struct RequestKey: Hashable {
        let route: String?
        let statusClass: Int
    }

    public init() {
        latency = registry.histogram("parley_http_request_duration_seconds", help: "HTTP request latency.")
    }

    /// Counts one finished request under its route pattern and status class.
    public func recordRequest(route: String?, status: Int, seconds: Double) {
        let key = RequestKey(route: route, statusClass: status / 100)
        let counter = requestCounters.withLock { cache in
            if let known = cache[key] { return known }
            let made = registry.counter("parley_http_requests_total", help: "HTTP requests by route and status class.",
                                        labels: [("route", route ?? "unmatched"), ("status", "\(key.statusClass)xx")])
            cache[key] = made
            return made
        }
        counter.increment()
        latency.observe(seconds)
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
}
