import ParleyMetrics

extension PostgresClient {
    /// Publishes the pool numbers (summed over loops) as gauges computed at each scrape.
    public func registerMetrics(in registry: MetricsRegistry) {
        registry.addCollector { [self] in
            let s = stats
            return [
                .init(name: "parley_postgres_connections_open", help: "PostgreSQL connections ready for statements", value: Double(s.connectionsOpen)),
                .init(name: "parley_postgres_connections_connecting", help: "PostgreSQL connections connecting or waiting to reconnect", value: Double(s.connectionsConnecting)),
                .init(name: "parley_postgres_queries_in_flight", help: "Statements sent to PostgreSQL and not yet answered", value: Double(s.queriesInFlight)),
                .init(name: "parley_postgres_waiters", help: "Statements waiting for a usable PostgreSQL connection", value: Double(s.waiters)),
                .init(name: "parley_postgres_reconnects", help: "PostgreSQL reconnect attempts after a lost connection", value: Double(s.reconnects)),
                .init(name: "parley_postgres_statements", help: "Statements sent to PostgreSQL", value: Double(s.statementsSent)),
                .init(name: "parley_postgres_unreachable", help: "Event loops whose pool knows PostgreSQL is unreachable (statements fail at once)", value: Double(s.unreachablePools)),
                .init(name: "parley_postgres_cursors_open", help: "Cursors of streamed answers declared and not yet closed", value: Double(s.openCursors)),
            ]
        }
    }
}
