#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// A one-shot gate a plain thread can block on until another thread opens it.
///
/// For the main thread and tests only: an event loop must never wait on it.
public final class Latch: Sendable {
    private let fd: Int32
    private let opened = Atomic<Bool>(false)

    public init() {
        fd = parley_eventfd(0, PARLEY_EFD_NONBLOCK_CLOEXEC)
        precondition(fd >= 0, "eventfd failed")
    }

    deinit { Glibc.close(fd) }

    /// Opens the gate; later calls do nothing. Safe from any thread.
    public func open() {
        guard !opened.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    public var isOpen: Bool { opened.load(ordering: .acquiring) }

    /// Blocks until the gate opens or `timeout` passes; returns whether it opened.
    @discardableResult
    public func wait(timeout: Duration? = nil) -> Bool {
        let deadline = timeout.map { EventLoop.monotonicNanoseconds() + UInt64(max(0, $0.components.seconds)) * 1_000_000_000 + UInt64(max(0, $0.components.attoseconds) / 1_000_000_000) }
        while !isOpen {
            var remaining: Int32 = -1
            if let deadline {
                let now = EventLoop.monotonicNanoseconds()
                if now >= deadline { return false }
                remaining = Int32(min((deadline - now) / 1_000_000 + 1, 60_000))
            }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, remaining)
        }
        return true
    }
}
