import ParleyNet

/// Collects the items submitted during one event-loop tick (or, with `delay`, during that long
/// after the first one) and hands them to `commit` as one batch (group commit). At most
/// `maxInFlight` batches run at once; items that arrive meanwhile wait and form the next batch,
/// so batches grow with load.
///
/// Thread confinement: owned by `loop`; `submit` must be called on it (checked). `@unchecked
/// Sendable` so the commit task, which runs on the same loop, can hold it.
final class TickBatcher<Item>: @unchecked Sendable {
    let loop: EventLoop
    private let maxBatch: Int
    private let maxInFlight: Int
    private let delay: Duration?
    private let commit: ([Item]) async -> Void
    private var pending: [Item] = []
    private var inFlight = 0
    private var scheduled = false

    init(loop: EventLoop, maxBatch: Int, maxInFlight: Int, delay: Duration? = nil, commit: @escaping ([Item]) async -> Void) {
        self.loop = loop
        self.maxBatch = max(1, maxBatch)
        self.maxInFlight = max(1, maxInFlight)
        self.delay = delay
        self.commit = commit
    }

    /// Items waiting for a batch.
    var waiting: Int { pending.count }

    func submit(_ item: Item) {
        loop.preconditionInEventLoop()
        pending.append(item)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !scheduled, inFlight < maxInFlight, !pending.isEmpty else { return }
        scheduled = true
        if let delay, pending.count < maxBatch {
            loop.schedule(after: delay) { [self] in
                scheduled = false
                flush()
            }
            return
        }
        // Runs after every event of this tick was handled: the batch holds all of them.
        loop.executeLocal { [self] in
            scheduled = false
            flush()
        }
    }

    private func flush() {
        while inFlight < maxInFlight, !pending.isEmpty {
            let batch: [Item]
            if pending.count <= maxBatch {
                batch = pending
                pending = []
            } else {
                batch = Array(pending[..<maxBatch])
                pending.removeFirst(maxBatch)
            }
            inFlight += 1
            // The batch never leaves the loop: the task runs on it too.
            let bound = LoopBound(batch, loop: loop)
            Task(executorPreference: loop) { [self] in
                await commit(bound.value)
                inFlight -= 1
                scheduleFlush()
            }
        }
    }
}
