import ParleyMetrics
import Synchronization

/// The push worker's Prometheus metrics (`parley_push_*`).
public final class PushMetrics: Sendable {
    let sent: Counter
    let failed: Counter
    let dead: Counter
    let rejected: Counter
    let skipped: Counter
    let canceled: Counter
    let expired: Counter
    let gatewayRequestsOK: Counter
    let gatewayRequestsFailed: Counter
    let gatewayLatency: Histogram
    private let depth = Mutex<[String: Int]>([:])

    public init(registry: MetricsRegistry) {
        sent = registry.counter("parley_push_sent_total", help: "Pushes the gateway accepted.")
        failed = registry.counter("parley_push_failed_total", help: "Push attempts that failed and were scheduled again.")
        dead = registry.counter("parley_push_dead_total", help: "Push jobs that used up their attempts (dead letters).")
        rejected = registry.counter("parley_push_rejected_total", help: "Push jobs whose token the gateway rejected (token removed).")
        skipped = registry.counter("parley_push_skipped_total", help: "Push jobs logged and skipped because no gateway is configured.")
        canceled = registry.counter("parley_push_canceled_total", help: "Push jobs no longer needed (call ended, events delivered).")
        expired = registry.counter("parley_push_expired_total", help: "Call pushes whose call expired before they were sent.")
        gatewayRequestsOK = registry.counter("parley_push_gateway_requests_total", help: "Requests to the push gateway by result.",
                                             labels: [("result", "ok")])
        gatewayRequestsFailed = registry.counter("parley_push_gateway_requests_total", help: "Requests to the push gateway by result.",
                                                 labels: [("result", "error")])
        gatewayLatency = registry.histogram("parley_push_gateway_latency_seconds", help: "Push gateway request latency.",
                                            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        registry.addCollector { [weak self] in
            let counts = self?.depth.withLock { $0 } ?? [:]
            return ["pending", "sending", "dead"].map { state in
                MetricsRegistry.Sample(name: "parley_push_queue_depth", help: "Push jobs by state (refreshed every few seconds).",
                                       labels: [("state", state)], value: Double(counts[state] ?? 0))
            }
        }
    }

    /// Records the latest per-state job counts.
    func setDepth(_ counts: [String: Int]) {
        depth.withLock { $0 = counts }
    }

    func record(state: String) {
        switch state {
        case "sent": sent.increment()
        case "pending": failed.increment()
        case "dead":
            failed.increment()
            dead.increment()
        case "rejected": rejected.increment()
        case "skipped": skipped.increment()
        case "canceled": canceled.increment()
        case "expired": expired.increment()
        default: break
        }
    }
}
