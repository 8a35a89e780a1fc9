import Foundation
import ParleyLog
import Synchronization
import XCTest
@testable import ParleyNet

/// `DurableQueueWorker` over an in-memory queue: the slot bound, at-least-once recording, retries
/// woken at their due time rather than the poll interval, and stopping.
final class DurableQueueWorkerTests: XCTestCase {
    /// Items 0..<count; item `i` fails its first `failures[i]` attempts (due again after 20 ms);
    /// recording fails its first `recordFailures` calls.
    final class MemoryQueue: DurableQueue, @unchecked Sendable {
        struct State {
            var due: [Int] = []
            var attempts: [Int: Int] = [:]
            var done: Set<Int> = []
            var running = 0
            var maxRunning = 0
            var recordCalls = 0
            var maintained = 0
        }
        let state = Mutex(State())
        let failures: [Int: Int]
        let recordFailures: Int

        init(count: Int, failures: [Int: Int] = [:], recordFailures: Int = 0) {
            state.withLock { $0.due = Array(0..<count) }
            self.failures = failures
            self.recordFailures = recordFailures
        }

        var itemName: String { "test item" }

        func claim(limit: Int) async throws -> [Int] {
            state.withLock { state in
                let claimed = Array(state.due.prefix(limit))
                state.due.removeFirst(claimed.count)
                return claimed
            }
        }

        func attempt(_ item: Int) async -> Bool {
            let attempt = state.withLock { state -> Int in
                state.running += 1
                state.maxRunning = max(state.maxRunning, state.running)
                state.attempts[item, default: 0] += 1
                return state.attempts[item]!
            }
            try? await Task.sleep(for: .milliseconds(5))
            state.withLock { $0.running -= 1 }
            return attempt > (failures[item] ?? 0)
        }

        struct RecordFailed: Error {}

        func record(_ item: Int, _ succeeded: Bool) async throws -> Duration? {
            try state.withLock { state in
                state.recordCalls += 1
                if state.recordCalls <= recordFailures { throw RecordFailed() }
                if succeeded {
                    state.done.insert(item)
                    return nil
                }
                state.due.append(item)
                return .milliseconds(20)
            }
        }

        func maintain() async {
            state.withLock { $0.maintained += 1 }
        }
    }

    private func waitUntil(_ what: String, timeout: TimeInterval = 10, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() && Date() < deadline { usleep(5_000) }
        XCTAssertTrue(condition(), "timed out waiting until \(what)")
    }

    func testEveryItemIsDoneOnceWithinTheSlotBound() throws {
        let group = try EventLoopGroup(threads: 2)
        defer { group.shutdownGracefully() }
        let queue = MemoryQueue(count: 60)
        let worker = DurableQueueWorker(queue: queue, group: group, concurrency: 3, pollInterval: .seconds(30), logger: Logger(label: "test"))
        worker.start()
        waitUntil("60 items done") { queue.state.withLock { $0.done.count } == 60 }
        worker.stop(timeout: .seconds(5))
        let state = queue.state.withLock { $0 }
        XCTAssertEqual(state.attempts.values.reduce(0, +), 60, "each item attempted once")
        XCTAssertLessThanOrEqual(state.maxRunning, 3)
        XCTAssertEqual(state.maxRunning, 3, "the free slots are used")
        XCTAssertGreaterThanOrEqual(state.maintained, 1)
    }

    func testRetriesAreWokenAtTheirDueTimeAndFailedRecordsAreRetried() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let queue = MemoryQueue(count: 2, failures: [0: 3], recordFailures: 2)
        // A poll interval far beyond the test: only the retry's own wake-up can bring item 0 back.
        let worker = DurableQueueWorker(queue: queue, group: group, concurrency: 4, pollInterval: .seconds(60), logger: Logger(label: "test"))
        let started = Date()
        worker.start()
        waitUntil("both items done") { queue.state.withLock { $0.done.count } == 2 }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        worker.stop(timeout: .seconds(5))
        let state = queue.state.withLock { $0 }
        XCTAssertEqual(state.attempts[0], 4, "three failures, then done")
        XCTAssertEqual(state.attempts[1], 1)
        XCTAssertEqual(state.recordCalls, 2 + 5, "two failed records retried, then the five outcomes recorded")
    }

    func testStopWaitsForAttemptsInFlightAndClaimsNoMore() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let queue = MemoryQueue(count: 1000)
        let worker = DurableQueueWorker(queue: queue, group: group, concurrency: 2, pollInterval: .seconds(30), logger: Logger(label: "test"))
        worker.start()
        waitUntil("some items done") { queue.state.withLock { $0.done.count } >= 4 }
        worker.stop(timeout: .seconds(5))
        let stopped = queue.state.withLock { $0 }
        XCTAssertEqual(stopped.running, 0, "no attempt is in flight after stop")
        usleep(100_000)
        XCTAssertEqual(queue.state.withLock { $0.attempts.count }, stopped.attempts.count, "nothing claimed after stop")
        XCTAssertLessThan(stopped.done.count, 1000)
    }
}
