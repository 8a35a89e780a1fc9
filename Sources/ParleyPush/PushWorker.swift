#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// Sends this node's share of the push jobs. One dispatcher per node claims due jobs (`FOR
/// UPDATE SKIP LOCKED`, so nodes never claim the same job; one claimer per node, so a node's
/// claims never skip each other's locks) for every free slot of `concurrency`, and hands each
/// batch of `batchSize` to a task on the next event loop, which sends it in one gateway request
/// and records every job's outcome. A maintenance task recovers expired claims, refreshes the
/// queue-depth gauges and deletes old finished jobs.
///
/// A job is marked sent only after the gateway answered, so a node killed between the answer and
/// that commit leaves the job claimed; when its claim expires another node (or this one after a
/// restart) sends it again: at least once, at most twice for such a job.
public final class PushWorker: Sendable {
    public let configuration: PushConfiguration
    public let store: PushJobStore
    public let nodeID: String
    let gateway: GorushGateway?
    let metrics: PushMetrics
    let logger: Logger
    private let group: EventLoopGroup
    private let dispatcher: Dispatcher
    private let maintenanceSignal: WakeSignal
    private let backoff: RetryBackoff
    private let running = Atomic<Bool>(false)
    private let activeTasks = Atomic<Int>(0)
    private let nextLoop = Atomic<Int>(0)

    public init(store: PushJobStore, group: EventLoopGroup, configuration: PushConfiguration, gateway: GorushGateway?,
                metrics: PushMetrics, nodeID: String, logger: Logger = Logger(label: "push")) {
        self.store = store
        self.group = group
        self.configuration = configuration
        self.gateway = gateway
        self.metrics = metrics
        self.nodeID = nodeID
        self.logger = logger
        backoff = RetryBackoff(base: configuration.backoffBase, max: configuration.backoffMax)
        dispatcher = Dispatcher(signal: WakeSignal(loop: group.loops[0]))
        maintenanceSignal = WakeSignal(loop: group.loops[0])
    }

    // MARK: Lifecycle

    /// Starts the dispatcher and the maintenance task.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let loop = group.loops[0]
        activeTasks.add(2, ordering: .relaxed)
        Task(executorPreference: loop) { [self] in
            await dispatch()
            activeTasks.subtract(1, ordering: .releasing)
        }
        Task(executorPreference: loop) { [self] in
            await maintain()
            activeTasks.subtract(1, ordering: .releasing)
        }
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the batches in flight to be recorded.
    public func stop(timeout: Duration) {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        dispatcher.signal.wake()
        maintenanceSignal.wake()
        let deadline = EventLoop.monotonicNanoseconds() + UInt64(max(0, RetryBackoff.nanoseconds(timeout)))
        while activeTasks.load(ordering: .acquiring) > 0 && EventLoop.monotonicNanoseconds() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Makes the dispatcher look for due jobs now, or after `delay` (a message push waits for
    /// its collapse window). Safe from any thread.
    public func wake(after delay: Duration = .zero) {
        dispatcher.signal.wake(after: delay)
    }

    // MARK: Dispatching

    /// Claims jobs for the free slots and starts a task per batch, until stopped.
    private func dispatch() async {
        let signal = dispatcher.signal
        while running.load(ordering: .acquiring) {
            let free = configuration.concurrency - dispatcher.inFlight
            guard free > 0 else {
                // Every slot is busy: a finished batch wakes us.
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            let limit = free * configuration.batchSize
            let jobs: [PushJob]
            do {
                jobs = try await store.claim(limit: limit, node: nodeID, lease: configuration.lease,
                                             collapseWindow: configuration.collapseWindow, titleField: configuration.titleField)
            } catch {
                logger.warning("claiming push jobs failed", [("error", error.description)])
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            var index = 0
            while index < jobs.count {
                let batch = Array(jobs[index..<min(jobs.count, index + configuration.batchSize)])
                index += batch.count
                start(batch)
            }
            // Fewer than asked: nothing more is due now; a finished batch, a new job, a due retry
            // or the poll interval wakes us.
            if jobs.count < limit { await signal.sleep(upTo: configuration.pollInterval) }
        }
    }

    /// Sends a batch on the next loop; frees its slot (on the dispatcher's loop) when recorded.
    private func start(_ batch: [PushJob]) {
        dispatcher.inFlight += 1
        activeTasks.add(1, ordering: .relaxed)
        let loop = group.loops[nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue % group.loops.count]
        let dispatcher = self.dispatcher
        Task(executorPreference: loop) { [self] in
            let soonestRetry = await process(batch)
            dispatcher.signal.loop.execute {
                dispatcher.inFlight -= 1
                dispatcher.signal.wake()
                if let soonestRetry { dispatcher.signal.wake(after: soonestRetry) }
            }
            activeTasks.subtract(1, ordering: .releasing)
        }
    }

    /// Sends (or skips) a claimed batch and records every outcome. Returns the shortest retry
    /// delay, if any job is to be retried.
    func process(_ jobs: [PushJob]) async -> Duration? {
        var outcomes: [(job: PushJob, outcome: PushOutcome)] = []
        outcomes.reserveCapacity(jobs.count)
        var sendable: [PushJob] = []
        for job in jobs {
            switch job.moot {
            case .callEnded: outcomes.append((job, .canceled(reason: "the call ended before the push was sent")))
            case .expired: outcomes.append((job, .expired))
            case .delivered: outcomes.append((job, .canceled(reason: "the device received the events first")))
            case nil: sendable.append(job)
            }
        }
        if let gateway {
            if !sendable.isEmpty { outcomes += await send(sendable, through: gateway) }
        } else {
            for job in sendable {
                logger.info("push not sent: no gateway configured", [
                    ("job", "\(job.id)"), ("kind", job.kind.rawValue), ("user", job.userId), ("device", job.deviceId),
                    ("platform", job.platform == .ios ? "ios" : "android"), ("title", job.senderName ?? job.sender ?? ""),
                    ("messages", "\(job.messageCount)"), ("callId", job.callId ?? ""),
                ])
                outcomes.append((job, .skipped))
            }
        }
        await record(outcomes)
        var soonest: Duration?
        for (_, outcome) in outcomes {
            if case .retry(_, let delay) = outcome, soonest.map({ delay < $0 }) ?? true { soonest = delay }
        }
        return soonest
    }

    private func send(_ jobs: [PushJob], through gateway: GorushGateway) async -> [(job: PushJob, outcome: PushOutcome)] {
        let notifications = jobs.map { GorushNotification.build($0, configuration: configuration) }
        let started = EventLoop.monotonicNanoseconds()
        let result = await gateway.send(notifications)
        metrics.gatewayLatency.observe(Double(EventLoop.monotonicNanoseconds() - started) / 1e9)
        switch result {
        case .success(let response):
            metrics.gatewayRequestsOK.increment()
            let failures = response.failuresByJob(jobs)
            return jobs.map { job in
                guard let error = failures[job.id] else { return (job, .sent) }
                if isInvalidToken(error) { return (job, .rejected(error: error)) }
                return (job, .retry(error: error, delay: backoff.delay(afterAttempt: job.attempt)))
            }
        case .failure(let failure):
            metrics.gatewayRequestsFailed.increment()
            logger.warning("push gateway request failed", [("jobs", "\(jobs.count)"), ("error", failure.description)])
            return jobs.map { ($0, .retry(error: failure.description, delay: backoff.delay(afterAttempt: $0.attempt))) }
        }
    }

    func isInvalidToken(_ error: String) -> Bool {
        let lowered = error.lowercased()
        return configuration.invalidTokenErrors.contains { lowered.contains($0.lowercased()) }
    }

    /// Removes rejected tokens, then commits the outcomes; retried a few times, since a job whose
    /// outcome is not recorded is sent again when its lease expires.
    private func record(_ outcomes: [(job: PushJob, outcome: PushOutcome)]) async {
        let rejected = outcomes.compactMap { item -> (installationId: String, token: String)? in
            if case .rejected = item.outcome { return (item.job.deviceId, item.job.token) }
            return nil
        }
        var attempt = 0
        while true {
            do {
                if !rejected.isEmpty {
                    let removed = try await store.removeTokens(rejected)
                    logger.notice("removed push tokens the gateway rejected", [("tokens", "\(rejected.count)"), ("installations", "\(removed)")])
                }
                let states = try await store.finish(outcomes, maxAttempts: configuration.maxAttempts)
                for (id, state) in states {
                    metrics.record(state: state)
                    if state == "dead" {
                        let error = outcomes.first { $0.job.id == id }?.outcome.error ?? ""
                        logger.warning("push job is dead (attempts used up)", [("job", "\(id)"), ("error", error)])
                    }
                }
                return
            } catch {
                attempt += 1
                guard attempt < 5 else {
                    logger.error("recording push outcomes failed; the jobs are sent again after their lease", [
                        ("jobs", "\(outcomes.count)"), ("error", error.description)])
                    return
                }
                await (EventLoop.current ?? group.loops[0]).sleep(for: .milliseconds(200 * attempt))
            }
        }
    }

    // MARK: Maintenance

    private func maintain() async {
        var lastRetention: UInt64 = 0
        while running.load(ordering: .acquiring) {
            do {
                let recovered = try await store.recoverExpiredLeases(maxAttempts: configuration.maxAttempts)
                if recovered > 0 {
                    logger.warning("push jobs recovered from a stopped node", [("jobs", "\(recovered)")])
                    wake()
                }
                metrics.setDepth(try await store.countByState())
                let now = EventLoop.monotonicNanoseconds()
                if lastRetention == 0 || now - lastRetention > 3_600_000_000_000 {
                    lastRetention = now
                    let deleted = try await store.deleteFinished(olderThan: configuration.retention)
                    if deleted > 0 { logger.info("push retention deleted finished jobs", [("jobs", "\(deleted)")]) }
                }
            } catch {
                logger.warning("push maintenance failed", [("error", error.description)])
            }
            await maintenanceSignal.sleep(upTo: Self.maintenanceInterval(configuration))
        }
    }

    static func maintenanceInterval(_ configuration: PushConfiguration) -> Duration {
        min(.seconds(5), max(.milliseconds(200), configuration.lease / 4))
    }

    /// The dispatcher's state. Thread confinement: `inFlight` is used only on `signal.loop` (the
    /// dispatcher's task runs there; finished batches hop there), hence `@unchecked Sendable`.
    final class Dispatcher: @unchecked Sendable {
        let signal: WakeSignal
        private var batches = 0

        init(signal: WakeSignal) {
            self.signal = signal
        }

        /// Batches being sent.
        var inFlight: Int {
            get {
                signal.loop.preconditionInEventLoop()
                return batches
            }
            set {
                signal.loop.preconditionInEventLoop()
                batches = newValue
            }
        }
    }
}
