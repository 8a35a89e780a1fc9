#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// The key under which each loop thread stores its `EventLoop`.
private let currentLoopKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

/// One level-triggered epoll loop on its own thread: file descriptors, timers, tasks, and a
/// Swift concurrency executor.
///
/// Thread confinement: registrations, timers and local tasks belong to the loop thread; only
/// `execute`, `enqueue` (the executor entry point) and `stop` may be called from other threads,
/// and they go through a mutex-protected queue plus an `eventfd` wake-up.
public final class EventLoop: @unchecked Sendable {
    /// Position of the loop in its group.
    public let index: Int

    private let epollFD: Int32
    private let wakeFD: Int32
    private let threadID = Atomic<UInt>(0)
    private let remote = Mutex<[RemoteWork]>([])
    private let wakePending = Atomic<Bool>(false)
    private let running = Atomic<Bool>(true)
    private let lag = Atomic<UInt64>(0)

    // Loop-thread state.
    private var registrations: [Registration?] = []
    private var generation: UInt32 = 0
    private var timers = TimerQueue()
    private var localWork: [LocalWork] = []
    /// The batch `runWork` is running; swapped with `localWork` so neither array is reallocated per turn.
    private var runningWork: [LocalWork] = []
    private let events: UnsafeMutablePointer<epoll_event>
    private let eventCapacity = 512
    private var iterationStart: UInt64 = 0
    /// Where TLS connections of this loop move ciphertext on its way to the socket (loop thread).
    lazy var tlsScratch = ReadBuffer(capacity: 64 * 1024)

    private enum RemoteWork: Sendable {
        case closure(@Sendable () -> Void)
        case job(UnownedJob)
    }

    private enum LocalWork {
        case closure(() -> Void)
        case job(UnownedJob)
    }

    private struct Registration {
        var handler: any IOHandler
        var interest: IOInterest
        var generation: UInt32
    }

    private static let wakeToken = UInt64.max

    /// Creates a loop; its thread is started by `EventLoopGroup` (or `run()` on a thread of yours).
    public init(index: Int) throws(NetError) {
        self.index = index
        let ep = parley_epoll_create()
        guard ep >= 0 else { throw NetError.lastError("epoll_create1") }
        let ev = parley_eventfd(0, PARLEY_EFD_NONBLOCK_CLOEXEC)
        guard ev >= 0 else {
            Glibc.close(ep)
            throw NetError.lastError("eventfd")
        }
        epollFD = ep
        wakeFD = ev
        events = .allocate(capacity: eventCapacity)
        guard parley_epoll_ctl(ep, EPOLL_CTL_ADD, ev, PARLEY_EPOLLIN, EventLoop.wakeToken) == 0 else {
            throw NetError.lastError("epoll_ctl")
        }
    }

    deinit {
        Glibc.close(epollFD)
        Glibc.close(wakeFD)
        events.deallocate()
    }

    // MARK: Threads

    /// True on this loop's thread.
    public var inEventLoop: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    var hasStarted: Bool { threadID.load(ordering: .acquiring) != 0 }

    /// The loop whose thread is calling, if any.
    public static var current: EventLoop? {
        guard let raw = pthread_getspecific(currentLoopKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(raw).takeUnretainedValue()
    }

    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "not on event loop \(index)", file: file, line: line)
    }

    /// Monotonic time in nanoseconds.
    public static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Loop thread only: the monotonic time at which the loop woke up for the events it is
    /// handling now, read once per wake-up (like nginx's cached time). Cheaper than
    /// `monotonicNanoseconds()` for timestamps that need no more precision than one loop turn.
    public var iterationNanoseconds: UInt64 { iterationStart }

    /// How late the loop's last heartbeat timer fired, in nanoseconds (event-loop lag).
    public var lagNanoseconds: UInt64 { lag.load(ordering: .relaxed) }

    // MARK: Tasks

    /// Runs `task` on the loop thread soon. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        if inEventLoop {
            localWork.append(.closure(task))
        } else {
            submitRemote(.closure(task))
        }
    }

    /// Loop thread only: runs `task` after the current event has been handled.
    public func executeLocal(_ task: @escaping () -> Void) {
        preconditionInEventLoop()
        localWork.append(.closure(task))
    }

    private func submitRemote(_ work: RemoteWork) {
        remote.withLock { $0.append(work) }
        if !wakePending.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt64 = 1
            _ = Glibc.write(wakeFD, &one, 8)
        }
    }

    // MARK: Timers

    /// Loop thread only: runs `body` once after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> TimerID {
        preconditionInEventLoop()
        let (seconds, attoseconds) = delay.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
        return timers.schedule(deadline: EventLoop.monotonicNanoseconds() + UInt64(nanos), body)
    }

    /// Loop thread only: cancels a timer (no effect if it already ran).
    public func cancel(_ timer: TimerID) {
        preconditionInEventLoop()
        timers.cancel(timer)
    }

    // MARK: File descriptors

    /// Loop thread only: watches `fd` for `interest` (level-triggered) and reports to `handler`.
    public func register(fd: Int32, interest: IOInterest, handler: any IOHandler) throws(NetError) {
        preconditionInEventLoop()
        precondition(fd >= 0)
        let index = Int(fd)
        if index >= registrations.count {
            registrations.append(contentsOf: repeatElement(nil, count: index - registrations.count + 1))
        }
        generation &+= 1
        let token = UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard parley_epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, epollEvents(interest), token) == 0 else {
            throw NetError.lastError("epoll_ctl(add)")
        }
        registrations[index] = Registration(handler: handler, interest: interest, generation: generation)
    }

    /// Loop thread only: changes what a registered `fd` is watched for.
    public func setInterest(fd: Int32, _ interest: IOInterest) {
        preconditionInEventLoop()
        let index = Int(fd)
        guard index < registrations.count, var registration = registrations[index] else { return }
        guard registration.interest != interest else { return }
        registration.interest = interest
        registrations[index] = registration
        let token = UInt64(registration.generation) << 32 | UInt64(UInt32(bitPattern: fd))
        _ = parley_epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, epollEvents(interest), token)
    }

    /// Loop thread only: stops watching `fd` (does not close it).
    public func deregister(fd: Int32) {
        preconditionInEventLoop()
        let index = Int(fd)
        guard index < registrations.count, registrations[index] != nil else { return }
        registrations[index] = nil
        _ = parley_epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, 0, 0)
    }

    private func epollEvents(_ interest: IOInterest) -> UInt32 {
        var events: UInt32 = PARLEY_EPOLLRDHUP
        if interest.contains(.readable) { events |= PARLEY_EPOLLIN }
        if interest.contains(.writable) { events |= PARLEY_EPOLLOUT }
        return events
    }

    // MARK: Running

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        pthread_setspecific(currentLoopKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(currentLoopKey, nil) }
        scheduleHeartbeat()
        while running.load(ordering: .acquiring) || !localWork.isEmpty {
            let timeout = nextTimeoutMilliseconds()
            let count = parley_epoll_wait(epollFD, events, Int32(eventCapacity), timeout)
            if count < 0 && errno != EINTR { break }
            iterationStart = EventLoop.monotonicNanoseconds()
            if count > 0 { dispatchEvents(Int(count)) }
            runTimers()
            runWork()
        }
    }

    /// Asks the loop to finish its queued work and return from `run()`. Safe from any thread.
    public func stop() {
        running.store(false, ordering: .releasing)
        submitRemote(.closure({}))
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        if !localWork.isEmpty { return 0 }
        guard let deadline = timers.nextDeadline() else { return -1 }
        let now = EventLoop.monotonicNanoseconds()
        if deadline <= now { return 0 }
        let millis = (deadline - now + 999_999) / 1_000_000
        return Int32(min(millis, 60_000))
    }

    private func dispatchEvents(_ count: Int) {
        for i in 0..<count {
            let event = events + i
            let token = parley_epoll_event_data(event)
            let flags = parley_epoll_event_events(event)
            if token == EventLoop.wakeToken {
                drainWakeFD()
                continue
            }
            let fd = Int(UInt32(truncatingIfNeeded: token))
            let gen = UInt32(truncatingIfNeeded: token >> 32)
            guard fd < registrations.count, let registration = registrations[fd], registration.generation == gen else { continue }
            let handler = registration.handler
            if flags & (PARLEY_EPOLLIN | PARLEY_EPOLLHUP | PARLEY_EPOLLERR | PARLEY_EPOLLRDHUP) != 0,
               registration.interest.contains(.readable) || flags & (PARLEY_EPOLLHUP | PARLEY_EPOLLERR) != 0 {
                handler.handleReadable()
            }
            if flags & PARLEY_EPOLLOUT != 0 {
                // The read may have closed and replaced the registration.
                guard let current = registrations[fd], current.generation == gen, current.interest.contains(.writable) else { continue }
                handler.handleWritable()
            }
        }
    }

    private func drainWakeFD() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeFD, &value, 8)
        wakePending.store(false, ordering: .releasing)
        let work = remote.withLock { queue -> [RemoteWork] in
            let taken = queue
            queue.removeAll(keepingCapacity: true)
            return taken
        }
        for item in work {
            switch item {
            case .closure(let body): localWork.append(.closure(body))
            case .job(let job): localWork.append(.job(job))
            }
        }
    }

    private func runTimers() {
        guard !timers.isEmpty else { return }
        let due = timers.popExpired(now: EventLoop.monotonicNanoseconds())
        for action in due { action() }
    }

    private func runWork() {
        // Bounded rounds, so a task that keeps scheduling tasks cannot starve I/O.
        var rounds = 0
        while !localWork.isEmpty && rounds < 4 {
            swap(&localWork, &runningWork)
            for index in runningWork.indices {
                switch runningWork[index] {
                case .closure(let body): body()
                case .job(let job): job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
            runningWork.removeAll(keepingCapacity: true)
            rounds += 1
        }
    }

    private func scheduleHeartbeat() {
        let interval: UInt64 = 500_000_000
        let expected = EventLoop.monotonicNanoseconds() + interval
        schedule(after: .nanoseconds(Int64(interval))) { [weak self] in
            guard let self else { return }
            let now = EventLoop.monotonicNanoseconds()
            self.lag.store(now > expected ? now - expected : 0, ordering: .relaxed)
            if self.running.load(ordering: .relaxed) { self.scheduleHeartbeat() }
        }
    }

    // MARK: Executor entry point

    fileprivate func enqueueJob(_ job: UnownedJob) {
        if inEventLoop {
            localWork.append(.job(job))
        } else {
            submitRemote(.job(job))
        }
    }
}

extension EventLoop: SerialExecutor, TaskExecutor {
    /// Runs Swift concurrency jobs on this loop (`Task(executorPreference: loop)`, actors pinned to it).
    public func enqueue(_ job: consuming ExecutorJob) {
        enqueueJob(UnownedJob(job))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        preconditionInEventLoop()
    }
}

extension EventLoop {
    /// Suspends the calling task for `duration` using this loop's timers (any thread).
    public func sleep(for duration: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            execute { [self] in
                schedule(after: duration) { continuation.resume() }
            }
        }
    }
}
