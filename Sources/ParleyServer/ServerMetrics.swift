import ParleyHTTP
import ParleyMetrics
import ParleyNet
import ParleyPostgres

/// The process's Prometheus metrics: HTTP traffic, connections, database pool, loop lag.
public final class ServerMetrics: Sendable {
    public let registry = MetricsRegistry()
    private let latency: Histogram

    public init() {
        latency = registry.histogram("parley_http_request_duration_seconds", help: "HTTP request latency.")
    }

    /// Counts one finished request under its route pattern and status class.
    public func recordRequest(route: String?, status: Int, seconds: Double) {
        let statusClass = "\(status / 100)xx"
        registry.counter("parley_http_requests_total", help: "HTTP requests by route and status class.",
                         labels: [("route", route ?? "unmatched"), ("status", statusClass)]).increment()
        latency.observe(seconds)
    }

    /// Adds gauges read at scrape time from the server, the database pool and the loops.
    public func watch(openConnections: @escaping @Sendable () -> Int, database: PostgresClient?, group: EventLoopGroup) {
        registry.addCollector {
            var samples: [MetricsRegistry.Sample] = [
                .init(name: "parley_open_connections", help: "Open client connections.", value: Double(openConnections())),
            ]
            for loop in group.loops {
                samples.append(.init(name: "parley_event_loop_lag_seconds", help: "How late the loop's heartbeat timer fired.",
                                     labels: [("loop", "\(loop.index)")], value: Double(loop.lagNanoseconds) / 1e9))
            }
            if let database {
                let stats = database.stats
                let help = "PostgreSQL pool state summed over loops."
                samples += [
                    .init(name: "parley_db_connections", help: help, labels: [("state", "open")], value: Double(stats.connectionsOpen)),
                    .init(name: "parley_db_connections", help: help, labels: [("state", "connecting")], value: Double(stats.connectionsConnecting)),
                    .init(name: "parley_db_queries_in_flight", help: "Statements sent and not yet answered.", value: Double(stats.queriesInFlight)),
                    .init(name: "parley_db_waiters", help: "Statements waiting for a connection.", value: Double(stats.waiters)),
                    .init(name: "parley_db_reconnects", help: "Connections re-established after a loss.", value: Double(stats.reconnects)),
                    .init(name: "parley_db_statements", help: "Statements sent since start.", value: Double(stats.statementsSent)),
                ]
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
