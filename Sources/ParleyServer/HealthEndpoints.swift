import ParleyHTTP
import ParleyJSON
import ParleyPostgres

/// `/health` (process up), `/ready` (database answers) and `/metrics` (Prometheus).
public struct HealthEndpoints: Sendable {
    let database: PostgresClient?
    let metrics: ServerMetrics

    public init(database: PostgresClient?, metrics: ServerMetrics) {
        self.database = database
        self.metrics = metrics
    }

    private static let healthResponse = json(.ok, Array(#"{"status":"ok"}"#.utf8))

    /// Registers the three endpoints on `router`.
    public func register(on router: Router) {
        router.inline(.get, "/health") { _, _ in
            HealthEndpoints.healthResponse
        }
        router.inline(.get, "/metrics") { [metrics] _, _ in
            var headers = HTTPHeaders()
            headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            return HTTPResponse(status: .ok, headers: headers, body: Array(metrics.registry.render().utf8))
        }
        router.on(.get, "/ready") { [database] _, _ in
            guard let database else {
                return HealthEndpoints.json(503, Array(#"{"status":"unavailable","reason":"no database configured"}"#.utf8))
            }
            do {
                try await database.query("SELECT 1", prepared: false)
                return HealthEndpoints.json(.ok, Array(#"{"status":"ready"}"#.utf8))
            } catch {
                let body: JSONValue = ["status": "unavailable", "reason": .string("\(error)")]
                return HealthEndpoints.json(503, Array(body.serialized().utf8))
            }
        }
    }

    static func json(_ status: HTTPStatus, _ body: [UInt8]) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}

