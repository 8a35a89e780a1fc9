#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// A small pool of threads for blocking work (password hashing, disk, process spawning), so
/// that nothing blocking runs on an event loop.
public final class BlockingPool: Sendable {
    private let queue = Mutex<(jobs: [@Sendable () -> Void], head: Int, stopping: Bool)>(([], 0, false))
    private let semaphoreFD: Int32
    private let queueLimit: Int
    private let threads: Mutex<[NetThread]>
    private let threadCount: Int

    /// Starts `threads` workers; at most `queueLimit` jobs wait at once.
    public init(threads: Int, queueLimit: Int = 10_000) throws(NetError) {
        let fd = parley_eventfd(0, PARLEY_EFD_SEMAPHORE_CLOEXEC)
        guard fd >= 0 else { throw NetError.lastError("eventfd") }
        semaphoreFD = fd
        self.queueLimit = queueLimit
        threadCount = max(1, threads)
        self.threads = Mutex([])
        var started: [NetThread] = []
        for i in 0..<threadCount {
            started.append(try NetThread.spawn(name: "parley-work-\(i)") { [self] in self.workerLoop() })
        }
        self.threads.withLock { $0 = started }
    }

    deinit {
        Glibc.close(semaphoreFD)
    }

    /// Jobs waiting for a worker.
    public var queuedJobs: Int { queue.withLock { $0.jobs.count - $0.head } }

    /// Runs `work` on a pool thread; the calling task resumes (on its executor) with the result.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            do {
                try submit {
                    do {
                        continuation.resume(returning: try work())
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Queues `job` for a worker thread.
    public func submit(_ job: @escaping @Sendable () -> Void) throws(NetError) {
        let accepted = queue.withLock { state -> NetError? in
            if state.stopping { return .shuttingDown }
            if state.jobs.count - state.head >= queueLimit { return .queueFull }
            state.jobs.append(job)
            return nil
        }
        if let accepted { throw accepted }
        var one: UInt64 = 1
        _ = Glibc.write(semaphoreFD, &one, 8)
    }

    /// Lets queued jobs finish, then stops the workers.
    public func shutdown() {
        queue.withLock { $0.stopping = true }
        var wake = UInt64(threadCount)
        _ = Glibc.write(semaphoreFD, &wake, 8)
        let joined = threads.withLock { list -> [NetThread] in
            let taken = list
            list.removeAll()
            return taken
        }
        for thread in joined { thread.join() }
    }

    private func workerLoop() {
        while true {
            var value: UInt64 = 0
            let n = Glibc.read(semaphoreFD, &value, 8)
            if n < 0 && errno == EINTR { continue }
            let next = queue.withLock { state -> (job: (@Sendable () -> Void)?, stop: Bool) in
                guard state.head < state.jobs.count else { return (nil, state.stopping) }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head > 1024 && state.head * 2 > state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return (job, false)
            }
            if let job = next.job {
                job()
            } else if next.stop {
                // Pass the wake-up on so every worker sees the stop.
                var one: UInt64 = 1
                _ = Glibc.write(semaphoreFD, &one, 8)
                return
            }
        }
    }
}
