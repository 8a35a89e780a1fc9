import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres

/// Cloud Code through webhooks for one node: the registered hooks, the caller, and the worker
/// that delivers after* triggers and jobs at least once (docs/cloud-code.md).
public final class CloudCode: Sendable {
    public let configuration: CloudConfiguration
    public let hooks: HookStore
    public let caller: WebhookCaller
    public let deliveries: DeliveryStore
    public let worker: CloudWorker
    /// The hooks on messages and calls.
    public let traffic: TrafficWebhooks
    private let client: HTTPClient
    private let group: EventLoopGroup
    private let logger: Logger

    /// `blockingPool` resolves webhook host names (not needed for numeric addresses).
    public init(database: PostgresClient, group: EventLoopGroup, configuration: CloudConfiguration = CloudConfiguration(),
                blockingPool: BlockingPool? = nil, metrics: MetricsRegistry? = nil, logger: Logger = Logger(label: "cloud")) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        client = HTTPClient(group: group, configuration: HTTPClient.Configuration(
            connectTimeout: min(.seconds(5), configuration.timeout), requestTimeout: configuration.timeout,
            maxConnectionsPerHost: configuration.connectionsPerHost, maxQueuedRequestsPerHost: configuration.queuePerHost,
            responseLimits: HTTPResponseParser.Limits(maxBodyBytes: configuration.maxAnswerBytes), userAgent: "parley-webhooks"),
                            blockingPool: blockingPool)
        hooks = HookStore(database: database)
        caller = WebhookCaller(client: client, key: configuration.webhookKey, timeout: configuration.timeout)
        deliveries = DeliveryStore(database: database)
        worker = CloudWorker(store: deliveries, caller: caller, group: group, configuration: configuration,
                             metrics: CloudMetrics(registry: metrics ?? MetricsRegistry()), logger: logger)
        traffic = TrafficWebhooks(hooks: hooks, caller: WebhookCaller(client: client, key: configuration.webhookKey, timeout: configuration.trafficTimeout),
                                  deliveries: deliveries, worker: worker, failOpen: configuration.trafficFailOpen, logger: logger)
    }

    /// Listens for hook changes and starts the delivery worker.
    public func start() {
        if configuration.webhookKey == nil { logger.warning("no --webhook-key: webhook calls carry no X-Parse-Webhook-Key") }
        hooks.startListening(on: group.loops[0])
        worker.start()
    }

    /// Stops the worker (waiting up to `timeout` for calls in flight) and the client.
    public func stop(timeout: Duration) {
        worker.stop(timeout: timeout)
        hooks.stopListening()
        client.shutdown()
    }

    /// Calls function `name`'s webhook with `body` (Parse's function request) and returns its result.
    public func runFunction(_ name: String, body: JSONObject) async throws(CloudError) -> JSONValue {
        guard let url = try await hooks.table().functions[name] else { throw .invalidFunction(name) }
        return try await caller.call(url, body: body)
    }

    /// Queues job `name` (a function hook of that name) with `params`; returns its `_JobStatus` id.
    public func startJob(_ name: String, params: JSONObject, body: JSONObject) async throws(CloudError) -> String {
        guard let url = try await hooks.table().functions[name] else { throw .invalidJob(name) }
        let id = Self.objectID()
        var body = body
        body["jobId"] = .string(id)
        do {
            try await deliveries.enqueueJob(id: id, name: name, params: params, url: url, body: body)
        } catch {
            throw .database(error)
        }
        worker.wake()
        return id
    }

    /// Ten random alphanumerics, like Parse object ids.
    static func objectID() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var random = SystemRandomNumberGenerator()
        return String(decoding: (0..<10).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }, as: UTF8.self)
    }
}
