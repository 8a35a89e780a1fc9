#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import Synchronization

/// Works off this node's share of a `DurableQueue`: claims due items for each free slot of
/// `concurrency`, attempts each in its own task (spread over the loops), records the outcome
/// (retried a few times), and sleeps until woken, an item's retry is due, or `pollInterval`
/// passed. A slow item holds its slot only, never the claiming of others.
public final class DurableQueueWorker<Queue: DurableQueue>: Sendable {
    public let queue: Queue
    /// Items attempted at once.
    public let concurrency: Int
    /// How often the worker looks for due items (and runs upkeep) when nothing woke it.
    public let pollInterval: Duration
    private let group: EventLoopGroup
    private let signal: WakeSignal
    private let logger: Logger
    private let running = Atomic<Bool>(false)
    /// The claiming task and the attempts in flight.
    private let active = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)

    public init(queue: Queue, group: EventLoopGroup, concurrency: Int, pollInterval: Duration, logger: Logger) {
        self.queue = queue
        self.group = group
        self.concurrency = max(1, concurrency)
        self.pollInterval = pollInterval
        self.logger = logger
        signal = WakeSignal(loop: group.loops[0])
    }

    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        active.add(1, ordering: .relaxed)
        Task(executorPreference: group.loops[0]) { [self] in
            await work()
            active.subtract(1, ordering: .releasing)
        }
    }

    /// Stops claiming; waits (blocking, up to `timeout`) for the attempts in flight to be recorded.
    public func stop(timeout: Duration) {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        signal.wake()
        let deadline = EventLoop.monotonicNanoseconds() + timeout.nonNegativeNanoseconds
        while active.load(ordering: .acquiring) > 0 && EventLoop.monotonicNanoseconds() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Makes the worker look for due items now (one was queued). Safe from any thread.
    public func wake() {
        signal.wake()
    }

    private func work() async {
        var lastMaintenance: UInt64 = 0
        var next = 0
        while running.load(ordering: .acquiring) {
            let now = EventLoop.monotonicNanoseconds()
            if lastMaintenance == 0 || now - lastMaintenance > pollInterval.nonNegativeNanoseconds {
                lastMaintenance = now
                await queue.maintain()
            }
            let free = concurrency - inFlight.load(ordering: .acquiring)
            guard free > 0 else {
                await signal.sleep(upTo: pollInterval)
                continue
            }
            let claimed: [Queue.Item]
            do {
                claimed = try await queue.claim(limit: free)
            } catch {
                logger.warning("claiming due items failed", [("item", queue.itemName), ("error", "\(error)")])
                await signal.sleep(upTo: pollInterval)
                continue
            }
            for item in claimed {
                inFlight.add(1, ordering: .relaxed)
                active.add(1, ordering: .relaxed)
                let loop = group.loops[next % group.loops.count]
                next += 1
                Task(executorPreference: loop) { [self] in
                    let outcome = await queue.attempt(item)
                    await record(item, outcome)
                    inFlight.subtract(1, ordering: .releasing)
                    active.subtract(1, ordering: .releasing)
                    signal.wake()
                }
            }
            if claimed.count < free { await signal.sleep(upTo: pollInterval) }
        }
    }

    /// Commits an outcome, retried a few times: an unrecorded item is attempted again after its lease.
    private func record(_ item: Queue.Item, _ outcome: Queue.Outcome) async {
        for attempt in 1...5 {
            do {
                if let due = try await queue.record(item, outcome) { signal.wake(after: due) }
                return
            } catch {
                guard attempt < 5 else {
                    logger.error("recording an outcome failed; the item is attempted again after its lease",
                                 [("item", queue.itemName), ("error", "\(error)")])
                    return
                }
                await (EventLoop.current ?? group.loops[0]).sleep(for: .milliseconds(200 * attempt))
            }
        }
    }
}
