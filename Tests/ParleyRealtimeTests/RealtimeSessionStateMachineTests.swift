import ParleyJSON
@testable import ParleyRealtime
import XCTest

final class RealtimeSessionStateMachineTests: XCTestCase {
    typealias Machine = RealtimeSessionStateMachine

    func makeMachine(maxHeld: Int = 4) -> Machine {
        Machine(limits: ClientFrameLimits(), maxHeldFrames: maxHeld)
    }

    /// The JSON of a frame action.
    func json(_ action: Machine.Action) -> JSONValue? {
        guard case .send(let frame) = action else { return nil }
        let start = frame[1] & 0x7F == 126 ? 4 : 2
        return try? JSONParser().parse(Array(frame[start...]))
    }

    func hello(_ resume: Int64 = 0) -> String {
        #"{"type":"hello","sessionToken":"r:t","deviceId":"d1","resumeAfter":\#(resume)}"#
    }

    /// A machine with an open session whose device had events up to `lastSeq`.
    func openMachine(resume: Int64 = 0, lastSeq: Int64 = 0, trimmed: Int64 = 0) -> (Machine, [Machine.Action]) {
        var machine = makeMachine()
        XCTAssertEqual(machine.receivedText(hello(resume)), [.authenticate(HelloFrame(sessionToken: "r:t", deviceId: "d1", resumeAfter: resume))])
        let actions = machine.authenticated(userId: "u1", deviceId: "d1", resumeAfter: resume, lastSeq: lastSeq, trimmedSeq: trimmed)
        return (machine, actions)
    }

    // MARK: Session phases

    func testHelloThenWelcomeWithoutBacklog() {
        let (machine, actions) = openMachine()
        XCTAssertEqual(machine.phase, .open)
        XCTAssertEqual(actions.count, 1)
        XCTAssertEqual(json(actions[0]), ["type": "welcome", "userId": "u1", "deviceId": "d1", "lastSeq": 0, "gap": false])
    }

    func testWelcomeStartsReplayAfterResumePoint() {
        let (machine, actions) = openMachine(resume: 3, lastSeq: 10)
        XCTAssertEqual(json(actions[0])?["lastSeq"], 10)
        XCTAssertEqual(actions[1], .fetch(after: 3))
        XCTAssertTrue(machine.fetching)
        XCTAssertEqual(machine.delivered, 3)
    }

    func testGapAndReset() {
        XCTAssertEqual(json(openMachine(resume: 2, lastSeq: 10, trimmed: 5).1[0])?["gap"], true)
        XCTAssertEqual(json(openMachine(resume: 5, lastSeq: 10, trimmed: 5).1[0])?["gap"], false)
        // resumeAfter beyond anything assigned: the client's state is from another life of the device.
        let (machine, actions) = openMachine(resume: 50, lastSeq: 10)
        XCTAssertEqual(json(actions[0])?["reset"], true)
        XCTAssertEqual(actions[1], .fetch(after: 0))
        XCTAssertEqual(machine.acknowledgeable(upTo: 50), 0)
    }

    func testFirstFrameMustBeHello() {
        var machine = makeMachine()
        let actions = machine.receivedText(#"{"type":"ack","upTo":1}"#)
        XCTAssertEqual(json(actions[0])?["code"], "hello_required")
        XCTAssertEqual(actions[1], .close(code: 4002, reason: "hello_required"))
        XCTAssertEqual(machine.phase, .closed)
        XCTAssertEqual(machine.receivedText(hello()), [])

        var garbage = makeMachine()
        XCTAssertEqual(garbage.receivedText("{{").last, .close(code: 4002, reason: "hello_required"))

        var badDevice = makeMachine()
        let refused = badDevice.receivedText(#"{"type":"hello","sessionToken":"t","deviceId":"a b"}"#)
        XCTAssertEqual(json(refused[0])?["code"], "invalid_device")
        XCTAssertEqual(refused[1], .close(code: 4002, reason: "invalid_device"))
    }

    func testHelloDeadline() {
        var machine = makeMachine()
        let actions = machine.helloTimedOut()
        XCTAssertEqual(json(actions[0])?["code"], "hello_timeout")
        XCTAssertEqual(actions[1], .close(code: 4003, reason: "hello_timeout"))
        var late = makeMachine()
        _ = late.receivedText(hello())
        XCTAssertEqual(late.helloTimedOut(), [])
    }

    func testAuthenticationFailureCloses() {
        var machine = makeMachine()
        _ = machine.receivedText(hello())
        let actions = machine.authenticationFailed(.invalidSession, "invalid session token", closeCode: 4004)
        XCTAssertEqual(json(actions[0])?["code"], "invalid_session")
        XCTAssertEqual(actions[1], .close(code: 4004, reason: "invalid_session"))
        XCTAssertEqual(machine.authenticated(userId: "u", deviceId: "d", resumeAfter: 0, lastSeq: 0, trimmedSeq: 0), [])
    }

    func testFramesBeforeWelcomeAreHeldInOrderAndBounded() {
        var machine = makeMachine(maxHeld: 2)
        _ = machine.receivedText(hello())
        XCTAssertEqual(machine.receivedText(#"{"type":"typing","to":"a"}"#), [])
        XCTAssertEqual(machine.receivedText(#"{"type":"ack","upTo":0}"#), [])
        let overflow = machine.receivedText(#"{"type":"ack","upTo":0,"id":7}"#)
        XCTAssertEqual(json(overflow[0])?["code"], "too_many_pending")
        XCTAssertEqual(json(overflow[0])?["re"], 7)
        let bad = machine.receivedText("oops")
        XCTAssertEqual(json(bad[0])?["code"], "bad_json")
        let actions = machine.authenticated(userId: "u1", deviceId: "d1", resumeAfter: 0, lastSeq: 0, trimmedSeq: 0)
        XCTAssertEqual(actions.count, 3)
        XCTAssertEqual(actions[1], .handle(.typing(id: nil, to: "a", active: true)))
        XCTAssertEqual(actions[2], .handle(.ack(id: nil, upTo: 0)))
    }

    func testOpenSessionErrorsKeepTheConnection() {
        var (machine, _) = openMachine()
        XCTAssertEqual(json(machine.receivedText(hello())[0])?["code"], "already_authenticated")
        XCTAssertEqual(json(machine.receivedText(#"{"type":"message.send","id":3}"#)[0])?["re"], 3)
        XCTAssertEqual(machine.receivedText(#"{"type":"whatever","id":1}"#), [.handle(.other(type: "whatever", id: .int(1), object: ["type": "whatever", "id": 1]))])
        XCTAssertEqual(machine.phase, .open)
    }

    func testReplaced() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.replaced(), [.close(code: 4001, reason: "replaced by a newer connection of this device")])
        XCTAssertEqual(machine.replaced(), [])
        XCTAssertEqual(machine.liveEvent(seq: 1), .skip)
    }

    func testAnExpiredSessionClosesAndHandlesNothingMore() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.sessionExpired(), [.close(code: 4007, reason: "session expired")])
        XCTAssertEqual(machine.phase, .closed)
        XCTAssertEqual(machine.receivedText(#"{"type":"message.send","id":3}"#), [])
        XCTAssertEqual(machine.liveEvent(seq: 1), .skip)
        XCTAssertEqual(machine.sessionExpired(), [])
        var waiting = makeMachine()
        XCTAssertEqual(waiting.sessionExpired(), [], "no session yet: the hello deadline applies")
    }

    // MARK: Delivery cursor

    func testLiveEventsInOrderAreSentAtOnce() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.liveEvent(seq: 1), .send)
        XCTAssertEqual(machine.liveEvent(seq: 2), .send)
        XCTAssertEqual(machine.liveEvent(seq: 2), .skip)
        XCTAssertEqual(machine.liveEvent(seq: 1), .skip)
        XCTAssertEqual(machine.delivered, 2)
        XCTAssertEqual(machine.acknowledgeable(upTo: 10), 2)
    }

    func testOutOfOrderLiveEventReadsTheQueue() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.liveEvent(seq: 1), .send)
        // Seq 3 arrives before 2 (two batches committed on different loops).
        XCTAssertEqual(machine.liveEvent(seq: 3), .fetch(after: 1))
        XCTAssertEqual(machine.liveEvent(seq: 2), .skip)
        XCTAssertEqual(machine.liveEvent(seq: 4), .skip)
        XCTAssertTrue(machine.replayEvent(seq: 2))
        XCTAssertTrue(machine.replayEvent(seq: 3))
        // Seq 4 was announced during the read and the read did not see it: read again.
        XCTAssertEqual(machine.fetchCompleted(full: false), .fetch(after: 3))
        XCTAssertTrue(machine.replayEvent(seq: 4))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertEqual(machine.liveEvent(seq: 5), .send)
    }

    func testEventsAnnouncedButGoneAreSkipped() {
        // Seq 2 expired (a call invite): the read finds only seq 3; nothing is read twice.
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.liveEvent(seq: 3), .fetch(after: 0))
        XCTAssertFalse(machine.replayEvent(seq: 0))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertEqual(machine.delivered, 3)
        XCTAssertEqual(machine.liveEvent(seq: 4), .send)
    }

    func testReplayPagesUntilCaughtUp() {
        var (machine, actions) = openMachine(resume: 0, lastSeq: 5)
        XCTAssertEqual(actions.last, .fetch(after: 0))
        XCTAssertTrue(machine.replayEvent(seq: 1))
        XCTAssertTrue(machine.replayEvent(seq: 2))
        XCTAssertEqual(machine.fetchCompleted(full: true), .fetch(after: 2))
        XCTAssertEqual(machine.liveEvent(seq: 6), .skip)
        XCTAssertTrue(machine.replayEvent(seq: 3))
        XCTAssertTrue(machine.replayEvent(seq: 5))
        XCTAssertEqual(machine.fetchCompleted(full: false), .fetch(after: 5))
        XCTAssertTrue(machine.replayEvent(seq: 6))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertFalse(machine.fetching)
        XCTAssertEqual(machine.delivered, 6)
    }

    func testSlowReaderStopsLiveEventsAndCatchesUpAfterDrain() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.liveEvent(seq: 1), .send)
        machine.outboundBlocked()
        XCTAssertEqual(machine.liveEvent(seq: 2), .skip)
        XCTAssertEqual(machine.liveEvent(seq: 3), .skip)
        XCTAssertEqual(machine.outboundDrained(), .fetch(after: 1))
        XCTAssertTrue(machine.replayEvent(seq: 2))
        machine.outboundBlocked()
        XCTAssertFalse(machine.replayEvent(seq: 3))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertEqual(machine.delivered, 2)
        XCTAssertEqual(machine.outboundDrained(), .fetch(after: 2))
        XCTAssertTrue(machine.replayEvent(seq: 3))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertNil(machine.outboundDrained())
    }

    func testEventsBeforeWelcomeAreReadAfterIt() {
        var machine = makeMachine()
        _ = machine.receivedText(hello())
        XCTAssertEqual(machine.liveEvent(seq: 4), .skip)
        let actions = machine.authenticated(userId: "u1", deviceId: "d1", resumeAfter: 0, lastSeq: 3, trimmedSeq: 0)
        XCTAssertEqual(actions.last, .fetch(after: 0))
        XCTAssertTrue(machine.replayEvent(seq: 4))
        XCTAssertNil(machine.fetchCompleted(full: false))
    }

    func testHintsAndResynchronisation() {
        var (machine, _) = openMachine()
        XCTAssertEqual(machine.hinted(seq: 2), .fetch(after: 0))
        XCTAssertNil(machine.hinted(seq: 3))
        XCTAssertNil(machine.resynchronize())
        XCTAssertTrue(machine.replayEvent(seq: 1))
        XCTAssertTrue(machine.replayEvent(seq: 2))
        // A resync was asked during the read: read once more.
        XCTAssertEqual(machine.fetchCompleted(full: false), .fetch(after: 2))
        XCTAssertTrue(machine.replayEvent(seq: 3))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertNil(machine.hinted(seq: 3))
        XCTAssertEqual(machine.resynchronize(), .fetch(after: 3))
        XCTAssertNil(machine.fetchCompleted(full: false))
        XCTAssertEqual(machine.delivered, 3)
    }

    func testFailedReadIsRetried() {
        var (machine, _) = openMachine(resume: 0, lastSeq: 2)
        machine.fetchFailed()
        XCTAssertFalse(machine.fetching)
        XCTAssertEqual(machine.liveEvent(seq: 3), .fetch(after: 0))
        machine.fetchFailed()
        XCTAssertEqual(machine.retryFetch(), .fetch(after: 0))
    }

    func testAcknowledgementsAreCappedAtWhatTheClientHas() {
        var (machine, _) = openMachine(resume: 4, lastSeq: 8)
        XCTAssertEqual(machine.acknowledgeable(upTo: 8), 4)
        XCTAssertTrue(machine.replayEvent(seq: 5))
        XCTAssertEqual(machine.acknowledgeable(upTo: 8), 5)
        XCTAssertEqual(machine.acknowledgeable(upTo: 2), 2)
    }
}
