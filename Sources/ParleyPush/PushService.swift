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
///
/// The worker has its own PostgreSQL client (one or two connections per loop), so a large backlog
/// does not queue ahead of the requests' statements, with `synchronous_commit = off`: its claims
/// and outcomes do not wait for the WAL flush. If PostgreSQL itself crashes, the last fraction of
/// a second of them may be lost, and such a job is sent again (the at-most-twice case of a node
/// killed between send and commit); jobs are still created by the synchronous enqueue commit.
public final class PushService: DeliveryObserver {
    public let configuration: PushConfiguration
    public let store: PushJobStore
    public let worker: PushWorker
    public let metrics: PushMetrics
    private let client: HTTPClient?
    private let workerDatabase: PostgresClient?

    /// `blockingPool` resolves the gateway's host name (not needed for a numeric address).
    public init(database: PostgresClient, group: EventLoopGroup, configuration: PushConfiguration, blockingPool: BlockingPool? = nil,
                metrics registry: MetricsRegistry? = nil, logger: Logger = Logger(label: "push")) {
        self.configuration = configuration
        store = PushJobStore(database: database)
        if let connectionString = Self.workerConnectionString(database.configuration.connectionString) {
            workerDatabase = PostgresClient(group: group, configuration: PostgresConfiguration(
                connectionString: connectionString, connectionsPerLoop: configuration.concurrency > group.loops.count ? 2 : 1,
                statementTimeout: database.configuration.statementTimeout), logger: Logger(label: "push.postgres"))
        } else {
            workerDatabase = nil
        }
        metrics = PushMetrics(registry: registry ?? MetricsRegistry())
        var gateway: GorushGateway?
        if let url = configuration.gatewayURL {
            let perLoop = (configuration.concurrency + group.loops.count - 1) / group.loops.count
            let client = HTTPClient(group: group, configuration: HTTPClient.Configuration(
                connectTimeout: min(.seconds(5), configuration.requestTimeout), requestTimeout: configuration.requestTimeout,
                maxConnectionsPerHost: max(1, perLoop), maxQueuedRequestsPerHost: 64,
                responseLimits: HTTPResponseParser.Limits(maxBodyBytes: 4 << 20), userAgent: "parley-push",
                tlsCAFile: configuration.tlsCAFile), blockingPool: blockingPool)
            self.client = client
            gateway = GorushGateway(client: client, gateway: url, timeout: configuration.requestTimeout)
        } else {
            client = nil
        }
        var random = SystemRandomNumberGenerator()
        let id = String(random.next() & 0xFFFF_FFFF_FFFF, radix: 16)
        worker = PushWorker(store: workerDatabase.map { PushJobStore(database: $0) } ?? store, group: group, configuration: configuration,
                            gateway: gateway, metrics: metrics, nodeID: String(repeating: "0", count: 12 - id.count) + id, logger: logger)
    }

    /// Starts sending (logs where pushes go).
    public func start() {
        if let url = configuration.gatewayURL {
            worker.logger.info("push gateway", [("url", url.description), ("concurrency", "\(configuration.concurrency)")])
        } else {
            worker.logger.info("no push gateway configured: push jobs are logged and marked skipped")
        }
        workerDatabase?.start()
        worker.start()
    }

    /// Stops claiming and waits up to `timeout` for batches in flight; closes the gateway client.
    public func stop(timeout: Duration) {
        worker.stop(timeout: timeout)
        client?.shutdown()
        guard let workerDatabase else { return }
        let closed = Latch()
        Task {
            await workerDatabase.shutdown()
            closed.open()
        }
        closed.wait(timeout: .seconds(5))
    }

    /// `connectionString` with the worker's session settings (URI or key=value form): commits
    /// that do not wait for the WAL flush, and no bitmap scans, so a claim walks the due index in
    /// order even while the statistics of a queue that just filled up are stale (a bitmap scan
    /// would read and sort every due job to return the first hundred). Nil when the string sets
    /// `options` itself (then the worker shares the main client).
    static func workerConnectionString(_ connectionString: String) -> String? {
        guard !connectionString.contains("options") else { return nil }
        if connectionString.hasPrefix("postgresql://") || connectionString.hasPrefix("postgres://") {
            let separator = connectionString.contains("?") ? "&" : "?"
            return connectionString + separator + "options=-c%20synchronous_commit%3Doff%20-c%20enable_bitmapscan%3Doff"
        }
        return connectionString + " options='-c synchronous_commit=off -c enable_bitmapscan=off'"
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
