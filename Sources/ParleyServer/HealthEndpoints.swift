import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyPostgres

/// `/health` (process up), `/ready` (database answers) and `/metrics` (Prometheus).
public struct HealthEndpoints: Sendable {
    let database: PostgresClient?
    let metrics: ServerMetrics
    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    let metricsToken: String?

    /// `/ready` answers within this (503 when PostgreSQL has not answered by then).
    static let readyTimeout: Duration = .milliseconds(800)

    public init(database: PostgresClient?, metrics: ServerMetrics, metricsToken: String? = nil) {
        self.database = database
        self.metrics = metrics
        self.metricsToken = metricsToken
    }

    private static let healthResponse = json(.ok, Array(#"{"status":"ok"}"#.utf8))

    /// Registers the three endpoints on `router`.
    public func register(on router: Router) {
        router.constant(.get, "/health", response: HealthEndpoints.healthResponse)
        router.inline(.get, "/metrics") { [metrics, metricsToken] request, _ in
            if let metricsToken, !HealthEndpoints.hasBearerToken(request.headers, metricsToken) {
                var response = HealthEndpoints.json(401, Array(#"{"error":"unauthorized","reason":"/metrics needs Authorization: Bearer <metrics token>"}"#.utf8))
                response.headers.add("WWW-Authenticate", #"Bearer realm="metrics""#)
                return response
            }
            var headers = HTTPHeaders()
            headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            return HTTPResponse(status: .ok, headers: headers, body: Array(metrics.registry.render().utf8))
        }
        router.on(.get, "/ready") { [database] _, _ in
            guard let database else {
                return HealthEndpoints.json(503, Array(#"{"status":"unavailable","reason":"no database configured"}"#.utf8))
            }
            do {
                try await database.ping(within: HealthEndpoints.readyTimeout)
                return HealthEndpoints.json(.ok, Array(#"{"status":"ready"}"#.utf8))
            } catch {
                let body: JSONValue = ["status": "unavailable", "reason": .string("\(error)")]
                return HealthEndpoints.json(503, Array(body.serialized().utf8))
            }
        }
    }

    /// Whether the first `Authorization` header is `Bearer <token>` (scheme case-insensitive,
    /// token compared in constant time).
    static func hasBearerToken(_ headers: HTTPHeaders, _ token: String) -> Bool {
        headers.withFirstValue("Authorization") { value -> Bool in
            let scheme = Array("bearer".utf8)
            guard value.count > scheme.count + 1, value[scheme.count] == UInt8(ascii: " ") else { return false }
            for index in 0..<scheme.count where value[index] | 0x20 != scheme[index] { return false }
            return constantTimeEquals(UnsafeBufferPointer(rebasing: value[(scheme.count + 1)...]), token)
        } ?? false
    }

    static func json(_ status: HTTPStatus, _ body: [UInt8]) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}
