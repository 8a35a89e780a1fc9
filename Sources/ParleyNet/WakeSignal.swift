/// Where a task waits for work: woken by `wake` or after a time limit. Thread confinement:
/// `sleep` and the state run on `loop` (checked); `wake` may be called from any thread and
/// hops there. Hence `@unchecked Sendable`.
public final class WakeSignal: @unchecked Sendable {
    public let loop: EventLoop
    private var waiter: CheckedContinuation<Void, Never>?
    private var timer: TimerID?
    /// A wake that came while the lane was busy: the next sleep returns at once.
    private var woken = false

    public init(loop: EventLoop) {
        self.loop = loop
    }

    /// Suspends the calling task (running on `loop`) until woken or `limit` passed.
    public func sleep(upTo limit: Duration) async {
        loop.preconditionInEventLoop()
        if woken {
            woken = false
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter = continuation
            timer = loop.schedule(after: limit) { [self] in
                timer = nil
                resume()
            }
        }
    }

    /// Wakes the lane now or after `delay`.
    public func wake(after delay: Duration = .zero) {
        loop.execute { [self] in
            if delay <= .zero {
                wakeNow()
            } else {
                loop.schedule(after: delay) { [self] in wakeNow() }
            }
        }
    }

    private func wakeNow() {
        if waiter != nil {
            resume()
        } else {
            woken = true
        }
    }

    private func resume() {
        if let timer { loop.cancel(timer) }
        timer = nil
        woken = false
        let waiting = waiter
        waiter = nil
        waiting?.resume()
    }
}
