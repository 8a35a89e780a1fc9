#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// A fixed set of event loops, one thread each (by default one per core).
public final class EventLoopGroup: Sendable {
    /// The loops, in index order.
    public let loops: [EventLoop]
    private let threads: Mutex<[NetThread]>
    private let cursor = Atomic<Int>(0)

    /// Number of cores this process may run on.
    public static var coreCount: Int { Int(parley_cpu_count()) }

    /// Starts `threads` loops, each on its own thread.
    public init(threads count: Int = EventLoopGroup.coreCount) throws(NetError) {
        var made: [EventLoop] = []
        for i in 0..<max(1, count) { made.append(try EventLoop(index: i)) }
        loops = made
        var started: [NetThread] = []
        for loop in made {
            started.append(try NetThread.spawn(name: "parley-loop-\(loop.index)") { loop.run() })
        }
        threads = Mutex(started)
        // Wait until every loop has published its thread, so `inEventLoop` is exact from now on.
        for loop in made {
            while !loop.hasStarted { sched_yield() }
        }
    }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        loops[cursor.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Stops every loop after its queued work and joins the threads.
    public func shutdownGracefully() {
        for loop in loops { loop.stop() }
        let joined = threads.withLock { list -> [NetThread] in
            let taken = list
            list.removeAll()
            return taken
        }
        for thread in joined { thread.join() }
    }
}
