import Foundation
import Synchronization
import XCTest
@testable import ParleyNet

final class EventLoopTests: XCTestCase {
    func testExecuteFromOtherThreadRunsOnLoop() throws {
        let group = try EventLoopGroup(threads: 2)
        defer { group.shutdownGracefully() }
        let ran = expectation(description: "ran")
        let loop = group.loops[1]
        XCTAssertFalse(loop.inEventLoop)
        loop.execute {
            XCTAssertTrue(loop.inEventLoop)
            XCTAssertTrue(EventLoop.current === loop)
            ran.fulfill()
        }
        wait(for: [ran], timeout: 5)
    }

    func testTimersFireInDeadlineOrderAndCancel() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let loop = group.loops[0]
        let order = Mutex<[Int]>([])
        let done = expectation(description: "done")
        loop.execute {
            loop.schedule(after: .milliseconds(60)) {
                order.withLock { $0.append(3) }
                done.fulfill()
            }
            loop.schedule(after: .milliseconds(10)) { order.withLock { $0.append(1) } }
            let cancelled = loop.schedule(after: .milliseconds(20)) { order.withLock { $0.append(99) } }
            loop.schedule(after: .milliseconds(30)) { order.withLock { $0.append(2) } }
            loop.cancel(cancelled)
        }
        wait(for: [done], timeout: 5)
        XCTAssertEqual(order.withLock { $0 }, [1, 2, 3])
    }

    func testTaskWithExecutorPreferenceRunsOnLoop() async throws {
        let group = try EventLoopGroup(threads: 2)
        defer { group.shutdownGracefully() }
        let loop = group.loops[0]
        let pool = try BlockingPool(threads: 2)
        defer { pool.shutdown() }
        let result = await Task(executorPreference: loop) { () -> (Bool, Bool, Int) in
            let before = loop.inEventLoop
            let value = try? await pool.run { () -> Int in
                // Runs on a worker thread, never on the loop.
                EventLoop.current == nil ? 42 : -1
            }
            return (before, loop.inEventLoop, value ?? 0)
        }.value
        XCTAssertTrue(result.0)
        XCTAssertTrue(result.1, "continuation resumed off the loop")
        XCTAssertEqual(result.2, 42)
    }

    func testBlockingPoolRejectsPastQueueLimit() throws {
        let pool = try BlockingPool(threads: 1, queueLimit: 1)
        defer { pool.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        try pool.submit { gate.wait() }
        // The worker may not have taken the first job yet; fill until the queue is full.
        var rejected = false
        for _ in 0..<3 {
            do { try pool.submit {} } catch NetError.queueFull { rejected = true; break }
        }
        XCTAssertTrue(rejected)
        gate.signal()
    }
}
