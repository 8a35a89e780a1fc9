#if canImport(Glibc)
import Glibc
#endif
import ParleyJSON
import ParleyLog
import ParleyNet
import Synchronization

/// Sends this node's share of the deliveries (after* triggers and jobs): claims due ones for each
/// free slot of `concurrency`, calls each webhook in its own task, records the outcome. A webhook
/// that answered (even `{"error": …}`) is done; one that could not be reached or answered
/// nothing usable is retried with backoff, and dead after `maxAttempts`. A node killed mid-call
/// leaves its claim to expire and another node (or itself after a restart) sends it again: at
/// least once.
public final class CloudWorker: Sendable {
    let store: DeliveryStore
    let caller: WebhookCaller
    let configuration: CloudConfiguration
    private let group: EventLoopGroup
    private let signal: WakeSignal
    private let backoff: RetryBackoff
    private let logger: Logger
    private let running = Atomic<Bool>(false)
    private let active = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)

    init(store: DeliveryStore, caller: WebhookCaller, group: EventLoopGroup, configuration: CloudConfiguration, logger: Logger) {
        self.store = store
        self.caller = caller
        self.group = group
        self.configuration = configuration
        self.logger = logger
        signal = WakeSignal(loop: group.loops[0])
        backoff = RetryBackoff(base: configuration.backoffBase, max: configuration.backoffMax)
    }

    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        active.add(1, ordering: .relaxed)
        Task(executorPreference: group.loops[0]) { [self] in
            await work()
            active.subtract(1, ordering: .releasing)
        }
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the calls in flight to be recorded.
    public func stop(timeout: Duration) {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        signal.wake()
        let deadline = EventLoop.monotonicNanoseconds() + timeout.nonNegativeNanoseconds
        while active.load(ordering: .acquiring) > 0 && EventLoop.monotonicNanoseconds() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Makes the worker look for due deliveries now. Safe from any thread.
    public func wake() {
        signal.wake()
    }

    private func work() async {
        var next = 0
        while running.load(ordering: .acquiring) {
            let free = configuration.concurrency - inFlight.load(ordering: .acquiring)
            guard free > 0 else {
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            let claimed: [DeliveryStore.Claimed]
            do {
                claimed = try await store.claim(limit: free, lease: configuration.timeout + .seconds(5),
                                                jobLease: configuration.jobTimeout + .seconds(5))
            } catch {
                logger.warning("claiming webhook deliveries failed", [("error", "\(error)")])
                await signal.sleep(upTo: configuration.pollInterval)
                continue
            }
            for delivery in claimed {
                inFlight.add(1, ordering: .relaxed)
                active.add(1, ordering: .relaxed)
                let loop = group.loops[next % group.loops.count]
                next += 1
                Task(executorPreference: loop) { [self] in
                    await deliver(delivery)
                    inFlight.subtract(1, ordering: .releasing)
                    active.subtract(1, ordering: .releasing)
                    signal.wake()
                }
            }
            if claimed.count < free { await signal.sleep(upTo: configuration.pollInterval) }
        }
    }

    private func deliver(_ delivery: DeliveryStore.Claimed) async {
        guard case .object(let body)? = try? JSONParser().parse(delivery.body) else {
            await record { () async throws -> Void in try await store.finish(delivery, succeeded: false, message: "unreadable delivery body") }
            return
        }
        let timeout = delivery.kind == "job" ? configuration.jobTimeout : configuration.timeout
        let scoped = WebhookCaller(client: caller.client, key: caller.key, timeout: timeout)
        do {
            let result = try await scoped.call(delivery.url, body: body, retryOnStaleConnection: false)
            let message: String? = delivery.kind == "job" ? (result.string ?? (result.isNull ? nil : result.serialized())) : nil
            await record { () async throws -> Void in try await store.finish(delivery, succeeded: true, message: message) }
        } catch {
            switch error {
            case .scriptFailed(let message):
                logger.warning("webhook answered an error", [("kind", delivery.kind), ("url", delivery.url), ("error", message)])
                await record { () async throws -> Void in try await store.finish(delivery, succeeded: false, message: message) }
            default:
                let delay = backoff.delay(afterAttempt: delivery.attempt)
                let description = error.message
                await record { () async throws -> Void in
                    let dead = try await store.retry(delivery, error: description, delay: delay, maxAttempts: configuration.maxAttempts)
                    if dead {
                        logger.error("webhook delivery is dead", [("kind", delivery.kind), ("url", delivery.url), ("attempts", "\(delivery.attempt)"),
                                                                  ("error", description)])
                    } else {
                        logger.warning("webhook delivery failed; retrying", [("kind", delivery.kind), ("url", delivery.url),
                                                                             ("attempt", "\(delivery.attempt)"), ("error", description)])
                        signal.wake(after: delay)
                    }
                }
            }
        }
    }

    /// Commits an outcome, retried a few times: an unrecorded delivery is sent again after its lease.
    private func record(_ body: () async throws -> Void) async {
        for attempt in 1...5 {
            do {
                try await body()
                return
            } catch {
                guard attempt < 5 else {
                    logger.error("recording a webhook delivery failed; it is sent again after its lease", [("error", "\(error)")])
                    return
                }
                await (EventLoop.current ?? group.loops[0]).sleep(for: .milliseconds(200 * attempt))
            }
        }
    }
}
