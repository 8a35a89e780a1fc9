import ParleyLog
import ParleyNet
import Synchronization

/// Sends this node's share of the outbox through a `DurableQueueWorker`: claims due mails
/// (`FOR UPDATE SKIP LOCKED`, so nodes never claim the same one) for each free slot of
/// `concurrency`, delivers each in its own task, records the outcome; a temporary failure is
/// retried with backoff, a refusal (5xx) is dead at once. Expired claims (a node stopped
/// mid-send) are recovered, and old sent mails deleted.
///
/// A mail is marked sent only after the server accepted it, so a node killed between the two
/// sends it again when its claim expires: at least once. Its Message-ID is the same both times.
public final class MailWorker: Sendable {
    public let outbox: MailOutbox
    public let configuration: MailConfiguration
    public let nodeID: String
    private let worker: DurableQueueWorker<MailDeliveries>

    public init(outbox: MailOutbox, client: SMTPClient, group: EventLoopGroup, configuration: MailConfiguration, nodeID: String,
                metrics: MailMetrics, logger: Logger = Logger(label: "mail")) {
        self.outbox = outbox
        self.configuration = configuration
        self.nodeID = nodeID
        let deliveries = MailDeliveries(outbox: outbox, client: client, configuration: configuration, nodeID: nodeID, metrics: metrics, logger: logger)
        worker = DurableQueueWorker(queue: deliveries, group: group, concurrency: configuration.concurrency,
                                    pollInterval: configuration.pollInterval, logger: logger)
    }

    /// Mails this worker delivered (tests, metrics).
    public var delivered: Int { worker.queue.sentCount.load(ordering: .relaxed) }

    public func start() {
        worker.start()
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the deliveries in flight to be recorded.
    public func stop(timeout: Duration) {
        worker.stop(timeout: timeout)
    }

    /// Makes the worker look for due mails now (a mail was queued). Safe from any thread.
    public func wake() {
        worker.wake()
    }
}

/// The outbox as a `DurableQueue`: a mail is attempted by handing it to the SMTP server.
final class MailDeliveries: DurableQueue {
    let outbox: MailOutbox
    let client: SMTPClient
    let configuration: MailConfiguration
    let nodeID: String
    let metrics: MailMetrics
    let logger: Logger
    let backoff: RetryBackoff
    let sentCount = Atomic<Int>(0)
    /// When sent mails were last deleted (monotonic nanoseconds; 0: never).
    private let lastRetention = Atomic<UInt64>(0)

    init(outbox: MailOutbox, client: SMTPClient, configuration: MailConfiguration, nodeID: String, metrics: MailMetrics, logger: Logger) {
        self.outbox = outbox
        self.client = client
        self.configuration = configuration
        self.nodeID = nodeID
        self.metrics = metrics
        self.logger = logger
        backoff = RetryBackoff(base: configuration.backoffBase, max: configuration.backoffMax)
    }

    var itemName: String { "mail" }

    func claim(limit: Int) async throws -> [MailOutbox.Claimed] {
        try await outbox.claim(limit: limit, node: nodeID, lease: configuration.lease)
    }

    func attempt(_ mail: MailOutbox.Claimed) async -> MailOutbox.Outcome {
        var random = SystemRandomNumberGenerator()
        let boundary = "parley-" + String(random.next(), radix: 36)
        let bytes = mail.message.rendered(id: mail.id, createdAt: mail.createdAt, boundary: boundary)
        do {
            _ = try await client.deliver(bytes, from: mail.message.from.address, to: mail.message.to.address)
            return .sent
        } catch {
            return error.isPermanent ? .dead(error: error.description)
                : .retry(error: error.description, delay: backoff.delay(afterAttempt: mail.attempt))
        }
    }

    func record(_ mail: MailOutbox.Claimed, _ outcome: MailOutbox.Outcome) async throws -> Duration? {
        let state = try await outbox.finish(id: mail.id, attempt: mail.attempt, outcome: outcome, maxAttempts: configuration.maxAttempts)
        switch (outcome, state) {
        case (.sent, _):
            sentCount.add(1, ordering: .relaxed)
            metrics.sent.increment()
            logger.info("mail sent", [("mail", "\(mail.id)"), ("kind", mail.kind), ("attempt", "\(mail.attempt)")])
            return nil
        case (.retry(let error, let delay), "pending"):
            metrics.retried.increment()
            logger.warning("mail delivery failed; retrying", [("mail", "\(mail.id)"), ("attempt", "\(mail.attempt)"), ("error", error),
                                                              ("retryIn", "\(delay.wholeMilliseconds)ms")])
            return delay
        case (.retry(let error, _), _), (.dead(let error), _):
            metrics.dead.increment()
            logger.error("mail is dead", [("mail", "\(mail.id)"), ("kind", mail.kind), ("attempts", "\(mail.attempt)"), ("error", error)])
            return nil
        }
    }

    /// Recovers expired leases; deletes old sent mails once an hour.
    func maintain() async {
        let now = EventLoop.monotonicNanoseconds()
        let last = lastRetention.load(ordering: .relaxed)
        let retention = last == 0 || now - last > 3_600_000_000_000
        if retention { lastRetention.store(now, ordering: .relaxed) }
        do {
            let recovered = try await outbox.recoverExpiredLeases(maxAttempts: configuration.maxAttempts)
            if recovered > 0 { logger.warning("mails recovered from a stopped node", [("mails", "\(recovered)")]) }
            if retention {
                let deleted = try await outbox.deleteSent(olderThan: configuration.retention)
                if deleted > 0 { logger.info("mail retention deleted sent mails", [("mails", "\(deleted)")]) }
            }
        } catch {
            logger.warning("mail maintenance failed", [("error", error.description)])
        }
    }
}
