import ParleyHTTP
import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import ParleyRealtime

/// Push delivery of one node: the job store, the worker, the gateway client, and the realtime
/// observer that wakes the worker when events were queued for offline devices.
///
/// The jobs themselves are created by PostgreSQL in the enqueueing transaction (the
/// `rt_on_offline_enqueue` function of migrations/0006_push.sql), so they exist even if this
/// node dies right after the commit; the observer only makes the worker look sooner.
public final class PushService: DeliveryObserver {
    public let configuration: PushConfiguration
    public let store: PushJobStore
    public let worker: PushWorker
    public let metrics: PushMetrics
    private let client: HTTPClient?

    /// `blockingPool` resolves the gateway's host name (not needed for a numeric address).
    public init(database: PostgresClient, group: EventLoopGroup, configuration: PushConfiguration, blockingPool: BlockingPool? = nil,
                metrics registry: MetricsRegistry? = nil, logger: Logger = Logger(label: "push")) {
        self.configuration = configuration
        store = PushJobStore(database: database)
        metrics = PushMetrics(registry: registry ?? MetricsRegistry())
        var gateway: GorushGateway?
        if let url = configuration.gatewayURL {
            let perLoop = (configuration.concurrency + group.loops.count - 1) / group.loops.count
            let client = HTTPClient(group: group, configuration: HTTPClient.Configuration(
                connectTimeout: min(.seconds(5), configuration.requestTimeout), requestTimeout: configuration.requestTimeout,
                maxConnectionsPerHost: max(1, perLoop), maxQueuedRequestsPerHost: 64,
                responseLimits: HTTPResponseParser.Limits(maxBodyBytes: 4 << 20), userAgent: "parley-push"), blockingPool: blockingPool)
            self.client = client
            gateway = GorushGateway(client: client, gateway: url, timeout: configuration.requestTimeout)
        } else {
            client = nil
        }
        var random = SystemRandomNumberGenerator()
        let id = String(random.next() & 0xFFFF_FFFF_FFFF, radix: 16)
        worker = PushWorker(store: store, group: group, configuration: configuration, gateway: gateway, metrics: metrics,
                            nodeID: String(repeating: "0", count: 12 - id.count) + id, logger: logger)
    }

    /// Starts sending (logs where pushes go).
    public func start() {
        if let url = configuration.gatewayURL {
            worker.logger.info("push gateway", [("url", url.description), ("lanes", "\(configuration.concurrency)")])
        } else {
            worker.logger.info("no push gateway configured: push jobs are logged and marked skipped")
        }
        worker.start()
    }

    /// Stops claiming and waits up to `timeout` for batches in flight; closes the gateway client.
    public func stop(timeout: Duration) {
        worker.stop(timeout: timeout)
        client?.shutdown()
    }

    // MARK: DeliveryObserver

    public func enqueuedForOfflineDevices(_ events: [EnqueuedEvent]) {
        var call = false
        var message = false
        for event in events {
            switch event.kind {
            case "call.incoming": call = true
            case "message": message = true
            default: break
            }
        }
        if call { worker.wake() }
        // A message push becomes due when its collapse window has passed.
        if message { worker.wake(after: configuration.collapseWindow + .milliseconds(20)) }
    }
}
