/// Receives one call per response the server writes, for metrics (Prometheus counters and
/// histograms in the wiring layer).
///
/// Called on the connection's event loop, after the response was handed to the socket: keep it
/// cheap and non-blocking.
public protocol HTTPServerObserver: Sendable {
    /// - Parameters:
    ///   - method: nil when the request line could not be parsed.
    ///   - route: the matched pattern (`/parse/classes/:className`), nil for 404s, 405s and errors.
    ///   - duration: from the complete request head to the response being written.
    func requestCompleted(method: HTTPMethod?, route: String?, status: HTTPStatus, duration: Duration)
}
