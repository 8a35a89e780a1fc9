import XCTest
@testable import ParleyNet

final class TimerQueueTests: XCTestCase {
    func testNextDeadlineSkipsCancelledTimersAtTheTop() {
        var queue = TimerQueue()
        let first = queue.schedule(deadline: 10) {}
        let second = queue.schedule(deadline: 20) {}
        _ = queue.schedule(deadline: 30) {}
        XCTAssertEqual(queue.nextDeadline(), 10)
        queue.cancel(first)
        XCTAssertEqual(queue.nextDeadline(), 20)
        queue.cancel(second)
        // Cancelling twice, or a timer that is gone, changes nothing.
        queue.cancel(second)
        queue.cancel(first)
        XCTAssertEqual(queue.nextDeadline(), 30)
        XCTAssertEqual(queue.count, 1)
    }

    func testPopExpiredSkipsCancelledTimersAndKeepsOrder() {
        var queue = TimerQueue()
        var fired: [Int] = []
        _ = queue.schedule(deadline: 30) { fired.append(3) }
        let cancelled = queue.schedule(deadline: 15) { fired.append(99) }
        let early = queue.schedule(deadline: 10) { fired.append(1) }
        _ = queue.schedule(deadline: 20) { fired.append(2) }
        let late = queue.schedule(deadline: 50) { fired.append(98) }
        queue.cancel(cancelled)
        for action in queue.popExpired(now: 25) { action() }
        XCTAssertEqual(fired, [1, 2])
        XCTAssertEqual(queue.nextDeadline(), 30)
        // Cancelling a timer that already ran does not count as a dead entry.
        queue.cancel(early)
        XCTAssertEqual(queue.nextDeadline(), 30)
        queue.cancel(late)
        XCTAssertEqual(queue.nextDeadline(), 30)
        for action in queue.popExpired(now: 100) { action() }
        XCTAssertEqual(fired, [1, 2, 3])
        XCTAssertNil(queue.nextDeadline())
        XCTAssertTrue(queue.isEmpty)
    }

    func testAReusedSlotDoesNotReviveAnOldTimer() {
        var queue = TimerQueue()
        var fired: [Int] = []
        let old = queue.schedule(deadline: 10) { fired.append(1) }
        _ = queue.schedule(deadline: 40) { fired.append(4) }
        queue.cancel(old)
        // Takes the cancelled timer's slot; the old heap entry (deadline 10) stays dead.
        let reused = queue.schedule(deadline: 30) { fired.append(3) }
        XCTAssertNotEqual(reused, old)
        XCTAssertEqual(queue.nextDeadline(), 30)
        queue.cancel(old)
        XCTAssertEqual(queue.count, 2)
        for action in queue.popExpired(now: 35) { action() }
        XCTAssertEqual(fired, [3])
        queue.cancel(reused)
        XCTAssertEqual(queue.count, 1)
        for action in queue.popExpired(now: 100) { action() }
        XCTAssertEqual(fired, [3, 4])
    }

    func testCancellingEveryTimerEmptiesTheQueue() {
        var queue = TimerQueue()
        let timers = (0..<5).map { queue.schedule(deadline: UInt64(100 - $0)) {} }
        for timer in timers { queue.cancel(timer) }
        XCTAssertNil(queue.nextDeadline())
        let next = queue.schedule(deadline: 7) {}
        XCTAssertEqual(queue.nextDeadline(), 7)
        queue.cancel(next)
        XCTAssertNil(queue.nextDeadline())
    }
}
