#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import ParleyNet
import Synchronization

/// Sends this node's share of the outbox: claims due mails (`FOR UPDATE SKIP LOCKED`, so nodes
/// never claim the same one) for each free slot of `concurrency`, delivers each in its own task,
/// records the outcome; a
/// temporary failure is retried with backoff, a refusal (5xx) is dead at once. Expired claims
/// (a node stopped mid-send) are recovered, and old sent mails deleted.
///
/// A mail is marked sent only after the server accepted it, so a node killed between the two
/// sends it again when its claim expires: at least once. Its Message-ID is the same both times.
public final class MailWorker: Sendable {
    public let outbox: MailOutbox
    public let configuration: MailConfiguration
    public let nodeID: String
    private let client: SMTPClient
    private let group: EventLoopGroup
    private let signal: WakeSignal
    private let backoff: RetryBackoff
    private let logger: Logger
    private let metrics: MailMetrics
    private let running = Atomic<Bool>(false)
    /// The claiming task and the deliveries in flight.
    private let active = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)
    private let sentCount = Atomic<Int>(0)

    public init(outbox: MailOutbox, client: SMTPClient, group: EventLoopGroup, configuration: MailConfiguration, nodeID: String,
                metrics: MailMetrics, logger: Logger = Logger(label: "mail")) {
        self.outbox = outbox
        self.client = client
        self.group = group
        self.configuration = configuration
        self.nodeID = nodeID
        self.logger = logger
        self.metrics = metrics
        signal = WakeSignal(loop: group.loops[0])
        backoff = RetryBackoff(base: configuration.backoffBase, max: configuration.backoffMax)
    }

    /// Mails this worker delivered (tests, metrics).
    public var delivered: Int { sentCount.load(ordering: .relaxed) }

    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        active.add(1, ordering: .relaxed)
        Task(executorPreference: group.loops[0]) { [self] in
            await work()
            active.subtract(1, ordering: .releasing)
        }
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the deliveries in flight to be recorded.
    public func stop(timeout: Duration) {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        signal.wake()
        let deadline = EventLoop.monotonicNanoseconds() + timeout.nonNegativeNanoseconds
        while active.load(ordering: .acquiring) > 0 && EventLoop.monotonicNanoseconds() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Makes the worker look for due mails now (a mail was queued). Safe from any thread.
    public func wake() {
        signal.wake()
    }

    /// Claims mails for the free delivery slots and starts a task per mail, until stopped; a
    /// slow server holds its slot only, never the claiming of other mails.
    private func work() async {
        var lastMaintenance: UInt64 = 0
        var lastRetention: UInt64 = 0
        var next = 0
        while running.load(ordering: .acquiring) {
            let now = EventLoop.monotonicNanoseconds()
            if lastMaintenance == 0 || now - lastMaintenance > configuration.pollInterval.nonNegativeNanoseconds {
                lastMaintenance = now
                let retention = lastRetention == 0 || now - lastRetention > 3_600_000_000_000
                if retention { lastRetention = now }
                await maintain(retention: retention)
            }
            let free = configuration.concurrency - inFlight.load(ordering: .acquiring)
            guard free > 0 else {
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            let claimed: [MailOutbox.Claimed]
            do {
                claimed = try await outbox.claim(limit: free, node: nodeID, lease: configuration.lease)
            } catch {
                logger.warning("claiming mails failed", [("error", error.description)])
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            for mail in claimed {
                inFlight.add(1, ordering: .relaxed)
                active.add(1, ordering: .relaxed)
                let loop = group.loops[next % group.loops.count]
                next += 1
                Task(executorPreference: loop) { [self] in
                    await deliver(mail)
                    inFlight.subtract(1, ordering: .releasing)
                    active.subtract(1, ordering: .releasing)
                    signal.wake()
                }
            }
            if claimed.count < free { await signal.sleep(upTo: configuration.pollInterval) }
        }
    }

    private func deliver(_ mail: MailOutbox.Claimed) async {
        var random = SystemRandomNumberGenerator()
        let boundary = "parley-" + String(random.next(), radix: 36)
        let bytes = mail.message.rendered(id: mail.id, createdAt: mail.createdAt, boundary: boundary)
        let outcome: MailOutbox.Outcome
        do {
            _ = try await client.deliver(bytes, from: mail.message.from.address, to: mail.message.to.address)
            outcome = .sent
        } catch {
            outcome = error.isPermanent ? .dead(error: error.description)
                : .retry(error: error.description, delay: backoff.delay(afterAttempt: mail.attempt))
        }
        await record(mail, outcome)
    }

    /// Commits the outcome, retried a few times: an unrecorded mail is sent again after its lease.
    private func record(_ mail: MailOutbox.Claimed, _ outcome: MailOutbox.Outcome) async {
        for attempt in 1...5 {
            do {
                let state = try await outbox.finish(id: mail.id, attempt: mail.attempt, outcome: outcome, maxAttempts: configuration.maxAttempts)
                switch (outcome, state) {
                case (.sent, _):
                    sentCount.add(1, ordering: .relaxed)
                    metrics.sent.increment()
                    logger.info("mail sent", [("mail", "\(mail.id)"), ("kind", mail.kind), ("attempt", "\(mail.attempt)")])
                case (.retry(let error, let delay), "pending"):
                    metrics.retried.increment()
                    logger.warning("mail delivery failed; retrying", [("mail", "\(mail.id)"), ("attempt", "\(mail.attempt)"), ("error", error),
                                                                      ("retryIn", "\(delay.wholeMilliseconds)ms")])
                    signal.wake(after: delay)
                case (.retry(let error, _), _), (.dead(let error), _):
                    metrics.dead.increment()
                    logger.error("mail is dead", [("mail", "\(mail.id)"), ("kind", mail.kind), ("attempts", "\(mail.attempt)"), ("error", error)])
                }
                return
            } catch {
                guard attempt < 5 else {
                    logger.error("recording a mail outcome failed; it is sent again after its lease", [("mail", "\(mail.id)"), ("error", error.description)])
                    return
                }
                await (EventLoop.current ?? group.loops[0]).sleep(for: .milliseconds(200 * attempt))
            }
        }
    }

    private func maintain(retention: Bool) async {
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
