import ParleyJSON
import ParleyLog
import ParleyMetrics
import ParleyNet
import Synchronization

/// Sends this node's share of the deliveries (after* triggers and jobs) through a
/// `DurableQueueWorker`. A webhook that answered (even `{"error": …}`) is done; one that could
/// not be reached or answered nothing usable is retried with backoff, and dead after
/// `maxAttempts` (or once older than `deliveryMaxAge`). A node killed mid-call leaves its claim to
/// expire and another node (or itself after a restart) sends it again: at least once. Beyond
/// `maxDeliveries` trigger deliveries the oldest are dropped (dead ones first), logged and counted.
public final class CloudWorker: Sendable {
    let worker: DurableQueueWorker<WebhookDeliveries>

    init(store: DeliveryStore, caller: WebhookCaller, group: EventLoopGroup, configuration: CloudConfiguration, metrics: CloudMetrics, logger: Logger) {
        worker = DurableQueueWorker(queue: WebhookDeliveries(store: store, caller: caller, configuration: configuration, metrics: metrics, logger: logger),
                                    group: group, concurrency: configuration.concurrency, pollInterval: configuration.pollInterval, logger: logger)
    }

    public func start() {
        worker.start()
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the calls in flight to be recorded.
    public func stop(timeout: Duration) {
        worker.stop(timeout: timeout)
    }

    /// Makes the worker look for due deliveries now. Safe from any thread.
    public func wake() {
        worker.wake()
    }
}

/// `cloud_deliveries` as a `DurableQueue`: a delivery is attempted by calling its webhook.
final class WebhookDeliveries: DurableQueue {
    /// How a call ended.
    enum Outcome: Sendable {
        /// The webhook answered; a job records `message`.
        case answered(message: String?)
        /// The webhook answered `{"error": …}` (done: not retried).
        case refused(String)
        /// No usable answer: retried after `delay`.
        case unreachable(String, delay: Duration)
    }

    let store: DeliveryStore
    let caller: WebhookCaller
    let configuration: CloudConfiguration
    let metrics: CloudMetrics
    let logger: Logger
    let backoff: RetryBackoff
    /// When the deliveries were last trimmed to the cap (monotonic nanoseconds; 0: never).
    private let lastTrim = Atomic<UInt64>(0)

    init(store: DeliveryStore, caller: WebhookCaller, configuration: CloudConfiguration, metrics: CloudMetrics, logger: Logger) {
        self.store = store
        self.caller = caller
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        backoff = RetryBackoff(base: configuration.backoffBase, max: configuration.backoffMax)
    }

    var itemName: String { "webhook delivery" }

    func claim(limit: Int) async throws -> [DeliveryStore.Claimed] {
        try await store.claim(limit: limit, lease: configuration.timeout + .seconds(5), jobLease: configuration.jobTimeout + .seconds(5))
    }

    func attempt(_ delivery: DeliveryStore.Claimed) async -> Outcome {
        guard case .object(let body)? = try? JSONParser().parse(delivery.body) else { return .refused("unreadable delivery body") }
        let timeout = delivery.kind == "job" ? configuration.jobTimeout : configuration.timeout
        let scoped = WebhookCaller(client: caller.client, key: caller.key, timeout: timeout)
        do {
            let result = try await scoped.call(delivery.url, body: body, retryOnStaleConnection: false)
            return .answered(message: delivery.kind == "job" ? (result.string ?? (result.isNull ? nil : result.serialized())) : nil)
        } catch {
            switch error {
            case .scriptFailed(let message):
                logger.warning("webhook answered an error", [("kind", delivery.kind), ("url", delivery.url), ("error", message)])
                return .refused(message)
            default:
                return .unreachable(error.message, delay: backoff.delay(afterAttempt: delivery.attempt))
            }
        }
    }

    func record(_ delivery: DeliveryStore.Claimed, _ outcome: Outcome) async throws -> Duration? {
        switch outcome {
        case .answered(let message):
            try await store.finish(delivery, succeeded: true, message: message)
            return nil
        case .refused(let message):
            try await store.finish(delivery, succeeded: false, message: message)
            return nil
        case .unreachable(let description, let delay):
            let dead = try await store.retry(delivery, error: description, delay: delay, maxAttempts: configuration.maxAttempts,
                                             maxAge: configuration.deliveryMaxAge)
            if dead {
                metrics.dead.increment()
                logger.error("webhook delivery is dead", [("kind", delivery.kind), ("url", delivery.url), ("attempts", "\(delivery.attempt)"),
                                                          ("error", description)])
                return nil
            }
            logger.warning("webhook delivery failed; retrying", [("kind", delivery.kind), ("url", delivery.url),
                                                                 ("attempt", "\(delivery.attempt)"), ("error", description)])
            return delay
        }
    }

    /// Every ten poll intervals: drops the trigger deliveries beyond `maxDeliveries`.
    func maintain() async {
        let now = EventLoop.monotonicNanoseconds()
        let last = lastTrim.load(ordering: .relaxed)
        guard last == 0 || now - last >= 10 * configuration.pollInterval.nonNegativeNanoseconds else { return }
        lastTrim.store(now, ordering: .relaxed)
        do {
            let dropped = try await store.trim(keeping: configuration.maxDeliveries)
            guard dropped.pending + dropped.dead > 0 else { return }
            metrics.dropped.increment(by: dropped.pending + dropped.dead)
            logger.error("webhook deliveries over the cap dropped, oldest first", [("pending", "\(dropped.pending)"), ("dead", "\(dropped.dead)"),
                                                                                  ("cap", "\(configuration.maxDeliveries)")])
        } catch {
            logger.warning("trimming webhook deliveries failed", [("error", "\(error)")])
        }
    }
}

/// Counters of the delivery worker.
struct CloudMetrics: Sendable {
    /// Deliveries that became dead (attempts or age used up).
    let dead: Counter
    /// Trigger deliveries dropped beyond the cap.
    let dropped: Counter

    init(registry: MetricsRegistry) {
        dead = registry.counter("parley_cloud_deliveries_dead_total", help: "Webhook deliveries that became dead (attempts or age used up).")
        dropped = registry.counter("parley_cloud_deliveries_dropped_total", help: "After-trigger deliveries dropped beyond --webhook-max-deliveries.")
    }
}
