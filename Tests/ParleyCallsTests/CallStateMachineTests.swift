import ParleyCalls
import ParleyJSON
import XCTest

/// Every event in every state, with the exact actions (or error) expected.
final class CallStateMachineTests: XCTestCase {
    static let caller = CallDevice(userId: "alice", deviceId: "a1")
    static let callerOther = CallDevice(userId: "alice", deviceId: "a2")
    static let calleeOne = CallDevice(userId: "bob", deviceId: "b1")
    static let calleeTwo = CallDevice(userId: "bob", deviceId: "b2")
    static let stranger = CallDevice(userId: "carol", deviceId: "c1")
    static let devices: [(String, CallDevice)] = [
        ("a1", caller), ("a2", callerOther), ("b1", calleeOne), ("b2", calleeTwo), ("c1", stranger),
    ]
    static let timeouts = CallTimeouts(reach: .seconds(10), ring: .seconds(45), grace: .seconds(20))
    static let startedAt: Int64 = 1_700_000_000_000
    static let now: Int64 = startedAt + 500
    static let candidate: JSONValue = ["candidate": "candidate:1 1 udp 2122260223 10.0.0.1 50000 typ host", "sdpMid": "0"]
    static let negotiation = JSONObject([("sdp", "v=0 re-offer"), ("kind", "offer")])

    /// Every event, named for failure messages.
    static var allEvents: [(name: String, event: CallEvent)] {
        var events: [(String, CallEvent)] = [
            ("calleeUnknown", .calleeUnknown),
            ("calleeBusy", .calleeBusy),
            ("offered(2)", .offered(deviceCount: 2)),
            ("offered(0)", .offered(deviceCount: 0)),
            ("failed", .failed(error: "storage")),
            ("refused", .refused(CallRefusal(cause: .denied, error: "hook says no"))),
        ]
        for (name, device) in devices {
            events.append(("ringing/\(name)", .ringing(from: device)))
            events.append(("answer/\(name)", .answer(from: device, sdp: "answer-\(name)")))
            events.append(("established/\(name)", .established(from: device)))
            events.append(("candidates/\(name)", .candidates(from: device, candidates: [candidate])))
            events.append(("negotiate/\(name)", .negotiate(from: device, payload: negotiation)))
            events.append(("hangup/\(name)", .hangup(from: device, busy: false)))
            events.append(("hangupBusy/\(name)", .hangup(from: device, busy: true)))
            events.append(("lost/\(name)", .connectionLost(device)))
            events.append(("restored/\(name)", .connectionRestored(device)))
        }
        events += [
            ("timer/reach", .timerFired(.reach)),
            ("timer/ring", .timerFired(.ring)),
            ("timer/graceCaller", .timerFired(.grace(.caller))),
            ("timer/graceCallee", .timerFired(.grace(.callee))),
        ]
        return events
    }

    /// A machine driven into `state` along the usual path.
    static func machine(in state: CallState) -> CallStateMachine {
        var machine = CallStateMachine(callId: "c-1", caller: caller, calleeId: "bob", video: true, timeouts: timeouts, now: startedAt)
        _ = machine.start()
        let path: [CallEvent]
        switch state {
        case .initiating: path = []
        case .progressing: path = [.offered(deviceCount: 2)]
        case .ringing: path = [.offered(deviceCount: 2), .ringing(from: calleeOne)]
        case .answered: path = [.offered(deviceCount: 2), .ringing(from: calleeOne), .answer(from: calleeOne, sdp: "answer")]
        case .established: path = [.offered(deviceCount: 2), .ringing(from: calleeOne), .answer(from: calleeOne, sdp: "answer"), .established(from: caller)]
        case .ended: path = [.hangup(from: caller, busy: false)]
        }
        for event in path {
            _ = try! machine.handle(event, now: startedAt + 100)
        }
        precondition(machine.state == state)
        return machine
    }

    enum Outcome: Equatable {
        case error(CallError)
        case actions([CallAction], CallState)
    }

    // MARK: Expected outcomes

    static func ended(_ cause: CallEndCause, error: String? = nil, cancel: [CallTimer], answered: Bool, notifyCallee: Bool = true) -> Outcome {
        var actions: [CallAction] = cancel.map { .cancel($0) }
        actions.append(.send(.ended(cause, error: error), to: .caller))
        if answered {
            actions.append(.send(.ended(cause, error: error), to: .answerer))
        } else if notifyCallee {
            actions.append(.send(.ended(cause, error: error), to: .calleeDevices(except: nil)))
        }
        actions += [.persist, .finish]
        return .actions(actions, .ended)
    }

    static func expected(_ state: CallState, _ name: String) -> Outcome {
        let parts = name.split(separator: "/").map(String.init)
        let kind = parts[0]
        let who = parts.count > 1 ? parts[1] : ""
        let isCallee = who == "b1" || who == "b2"
        let unchanged = Outcome.actions([], state)

        if state == .ended {
            switch kind {
            case "ringing", "answer", "established", "candidates", "negotiate", "hangup", "hangupBusy":
                return .error(.callEnded)
            default:
                return unchanged
            }
        }

        let answered = state.isAnswered
        // Timers armed in this state: initiating/progressing {reach}, ringing {ring}, later none.
        let armed: [CallTimer] = switch state {
        case .initiating, .progressing: [.reach]
        case .ringing: [.ring]
        default: []
        }
        let progress: [CallAction] = state == .initiating ? [.send(.progress, to: .caller)] : []

        switch kind {
        case "calleeUnknown":
            return state == .initiating ? ended(.failure, error: "user_not_found", cancel: armed, answered: false, notifyCallee: false) : unchanged
        case "calleeBusy":
            return state == .initiating ? ended(.busy, cancel: armed, answered: false, notifyCallee: false) : unchanged
        case "offered(2)":
            return state == .initiating ? .actions([.send(.progress, to: .caller), .persist], .progressing) : unchanged
        case "offered(0)":
            return unchanged
        case "failed":
            return ended(.failure, error: "storage", cancel: armed, answered: answered)
        case "refused":
            return state == .initiating ? ended(.denied, error: "hook says no", cancel: armed, answered: false, notifyCallee: false) : unchanged
        case "ringing":
            guard isCallee else { return .error(.notCallee) }
            guard state == .initiating || state == .progressing else { return unchanged }
            return .actions(progress + [.cancel(.reach), .arm(.ring, after: .seconds(45)), .send(.ringing, to: .caller), .persist], .ringing)
        case "answer":
            guard isCallee else { return .error(.notCallee) }
            guard !answered else { return .error(.alreadyAnswered) }
            return .actions(progress + armed.map { .cancel($0) } + [
                .send(.answered(sdp: "answer-\(who)", deviceId: who), to: .caller),
                .send(.ended(.otherDeviceAnswered, error: nil), to: .calleeDevices(except: who)),
                .persist,
            ], .answered)
        case "established":
            if !answered { return .error(who == "a1" || isCallee ? .notAnswered : .notParty) }
            guard who == "a1" || who == "b1" else { return .error(.notParty) }
            guard state == .answered else { return unchanged }
            return .actions([.send(.established, to: .caller), .send(.established, to: .answerer), .persist], .established)
        case "candidates":
            if !answered {
                if who == "a1" { return unchanged }
                return .error(isCallee ? .notAnswered : .notParty)
            }
            switch who {
            case "a1": return .actions([.send(.candidates([candidate]), to: .answerer)], state)
            case "b1": return .actions([.send(.candidates([candidate]), to: .caller)], state)
            default: return .error(.notParty)
            }
        case "negotiate":
            if !answered { return .error(who == "a1" || isCallee ? .notAnswered : .notParty) }
            switch who {
            case "a1": return .actions([.send(.negotiate(negotiation), to: .answerer)], state)
            case "b1": return .actions([.send(.negotiate(negotiation), to: .caller)], state)
            default: return .error(.notParty)
            }
        case "hangup", "hangupBusy":
            if answered {
                guard who == "a1" || who == "b1" else { return .error(.notParty) }
                return ended(.hungUp, cancel: armed, answered: true)
            }
            if who == "a1" { return ended(.canceled, cancel: armed, answered: false) }
            if isCallee { return ended(kind == "hangupBusy" ? .busy : .denied, cancel: armed, answered: false) }
            return .error(.notParty)
        case "lost":
            if !answered {
                return who == "a1" ? ended(.inactive, cancel: armed, answered: false) : unchanged
            }
            switch who {
            case "a1": return .actions([.arm(.grace(.caller), after: .seconds(20))], state)
            case "b1": return .actions([.arm(.grace(.callee), after: .seconds(20))], state)
            default: return unchanged
            }
        case "restored":
            return unchanged
        case "timer":
            switch who {
            case "reach":
                return armed.contains(.reach) ? ended(.timeout, cancel: [], answered: false) : unchanged
            case "ring":
                return armed.contains(.ring) ? ended(.noAnswer, cancel: [], answered: false) : unchanged
            default:
                return unchanged
            }
        default:
            XCTFail("no expectation for \(name)")
            return unchanged
        }
    }

    // MARK: Tests

    func testEveryEventInEveryState() {
        var combinations = 0
        for state in CallState.allCases {
            for (name, event) in Self.allEvents {
                var machine = Self.machine(in: state)
                let before = machine
                let outcome: Outcome
                do {
                    let actions = try machine.handle(event, now: Self.now)
                    outcome = .actions(actions, machine.state)
                } catch {
                    outcome = .error(error)
                    XCTAssertEqual(machine, before, "\(state) + \(name): a refused request changed the call")
                }
                XCTAssertEqual(outcome, Self.expected(state, name), "\(state) + \(name)")
                combinations += 1
            }
        }
        XCTAssertEqual(combinations, CallState.allCases.count * (6 + 9 * 5 + 4))
    }

    func testStartArmsReachTimerAndOffersForTheCallLifetime() {
        var machine = CallStateMachine(callId: "c", caller: Self.caller, calleeId: "bob", video: false, timeouts: Self.timeouts, now: Self.startedAt)
        XCTAssertEqual(machine.start(), [.arm(.reach, after: .seconds(10)), .offer(expiresAt: Self.startedAt + 55_000)])
        XCTAssertEqual(machine.expiresAt, Self.startedAt + 55_000)
        XCTAssertEqual(machine.armed, [.reach])
        XCTAssertEqual(machine.state, .initiating)
    }

    func testEndedDetailsRecordTheWholeTimeline() throws {
        var machine = CallStateMachine(callId: "c", caller: Self.caller, calleeId: "bob", video: true, timeouts: Self.timeouts, now: 1_000)
        _ = machine.start()
        _ = try machine.handle(.offered(deviceCount: 1), now: 1_010)
        _ = try machine.handle(.ringing(from: Self.calleeTwo), now: 1_500)
        _ = try machine.handle(.answer(from: Self.calleeTwo, sdp: "s"), now: 4_500)
        _ = try machine.handle(.established(from: Self.calleeTwo), now: 5_000)
        let actions = try machine.handle(.hangup(from: Self.calleeTwo, busy: false), now: 65_000)
        XCTAssertEqual(actions, [.send(.ended(.hungUp, error: nil), to: .caller), .send(.ended(.hungUp, error: nil), to: .answerer), .persist, .finish])
        let details = machine.details
        XCTAssertEqual(details.startedAt, 1_000)
        XCTAssertEqual(details.progressedAt, 1_010)
        XCTAssertEqual(details.rungAt, 1_500)
        XCTAssertEqual(details.answeredAt, 4_500)
        XCTAssertEqual(details.establishedAt, 5_000)
        XCTAssertEqual(details.endedAt, 65_000)
        XCTAssertEqual(details.endCause, .hungUp)
        XCTAssertNil(details.error)
        XCTAssertTrue(details.video)
        XCTAssertEqual(details.duration, 60_000)
        XCTAssertEqual(details.setupDuration, 10)
        XCTAssertEqual(details.notifyingDuration, 490)
        XCTAssertEqual(details.ringingDuration, 3_000)
        XCTAssertEqual(machine.answerer, Self.calleeTwo)
    }

    func testUnansweredCallHasZeroDurationAndRingingUntilTheEnd() throws {
        var machine = CallStateMachine(callId: "c", caller: Self.caller, calleeId: "bob", video: false, timeouts: Self.timeouts, now: 0)
        _ = machine.start()
        _ = try machine.handle(.offered(deviceCount: 2), now: 5)
        _ = try machine.handle(.ringing(from: Self.calleeOne), now: 100)
        XCTAssertNil(machine.details.duration)
        _ = try machine.handle(.timerFired(.ring), now: 45_100)
        XCTAssertEqual(machine.details.endCause, .noAnswer)
        XCTAssertEqual(machine.details.duration, 0)
        XCTAssertEqual(machine.details.ringingDuration, 45_000)
        XCTAssertNil(machine.details.establishedAt)
    }

    func testAnsweredWithoutEstablishedCountsDurationFromTheAnswer() throws {
        var machine = Self.machine(in: .answered)
        _ = try machine.handle(.hangup(from: Self.caller, busy: false), now: Self.startedAt + 10_100)
        XCTAssertEqual(machine.details.duration, 10_000)
    }

    func testUnknownCalleeFailsAtOnceWithUserNotFound() throws {
        var machine = Self.machine(in: .initiating)
        _ = try machine.handle(.calleeUnknown, now: Self.now)
        XCTAssertEqual(machine.details.endCause, .failure)
        XCTAssertEqual(machine.details.error, "user_not_found")
        XCTAssertEqual(machine.details.endedAt, Self.now)
        XCTAssertTrue(machine.armed.isEmpty)
    }

    func testFirstAnswerWins() throws {
        var machine = Self.machine(in: .ringing)
        _ = try machine.handle(.ringing(from: Self.calleeTwo), now: Self.now)
        let first = try machine.handle(.answer(from: Self.calleeTwo, sdp: "two"), now: Self.now)
        XCTAssertTrue(first.contains(.send(.ended(.otherDeviceAnswered, error: nil), to: .calleeDevices(except: "b2"))))
        XCTAssertThrowsError(try machine.handle(.answer(from: Self.calleeOne, sdp: "one"), now: Self.now)) { error in
            XCTAssertEqual(error as? CallError, .alreadyAnswered)
        }
        XCTAssertEqual(machine.answerer, Self.calleeTwo)
        // The device that lost the race is no party to the call now.
        XCTAssertThrowsError(try machine.handle(.candidates(from: Self.calleeOne, candidates: [Self.candidate]), now: Self.now)) { error in
            XCTAssertEqual(error as? CallError, .notParty)
        }
        XCTAssertEqual(try machine.handle(.candidates(from: Self.calleeTwo, candidates: [Self.candidate]), now: Self.now), [.send(.candidates([Self.candidate]), to: .caller)])
    }

    func testCallerCandidatesBeforeTheAnswerGoToTheAnsweringDeviceOnly() throws {
        var machine = Self.machine(in: .ringing)
        let second: JSONValue = ["candidate": "candidate:2", "sdpMid": "0"]
        XCTAssertEqual(try machine.handle(.candidates(from: Self.caller, candidates: [Self.candidate]), now: Self.now), [])
        XCTAssertEqual(try machine.handle(.candidates(from: Self.caller, candidates: [second]), now: Self.now), [])
        XCTAssertEqual(machine.bufferedCandidates, [Self.candidate, second])
        let actions = try machine.handle(.answer(from: Self.calleeTwo, sdp: "s"), now: Self.now)
        XCTAssertEqual(actions, [
            .cancel(.ring),
            .send(.answered(sdp: "s", deviceId: "b2"), to: .caller),
            .send(.ended(.otherDeviceAnswered, error: nil), to: .calleeDevices(except: "b2")),
            .send(.candidates([Self.candidate, second]), to: .answerer),
            .persist,
        ])
        XCTAssertTrue(machine.bufferedCandidates.isEmpty)
    }

    func testBufferedCandidatesAreBounded() throws {
        var machine = Self.machine(in: .progressing)
        let many = Array(repeating: Self.candidate, count: CallStateMachine.maxBufferedCandidates)
        XCTAssertEqual(try machine.handle(.candidates(from: Self.caller, candidates: many), now: Self.now), [])
        XCTAssertThrowsError(try machine.handle(.candidates(from: Self.caller, candidates: [Self.candidate]), now: Self.now)) { error in
            guard case .limitExceeded = error as? CallError else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(machine.bufferedCandidates.count, CallStateMachine.maxBufferedCandidates)
    }

    func testPartyBackWithinGraceKeepsTheCall() throws {
        var machine = Self.machine(in: .established)
        XCTAssertEqual(try machine.handle(.connectionLost(Self.calleeOne), now: Self.now), [.arm(.grace(.callee), after: .seconds(20))])
        XCTAssertEqual(try machine.handle(.connectionLost(Self.calleeOne), now: Self.now), [], "a second loss arms nothing new")
        XCTAssertEqual(machine.absent, [.callee])
        XCTAssertEqual(try machine.handle(.connectionRestored(Self.calleeOne), now: Self.now), [.cancel(.grace(.callee))])
        XCTAssertTrue(machine.absent.isEmpty)
        // A timer that fires after its cancellation (a race in the executor) does nothing.
        XCTAssertEqual(try machine.handle(.timerFired(.grace(.callee)), now: Self.now), [])
        XCTAssertEqual(machine.state, .established)
    }

    func testPartyNotBackWithinGraceEndsInactive() throws {
        var machine = Self.machine(in: .answered)
        _ = try machine.handle(.connectionLost(Self.caller), now: Self.now)
        _ = try machine.handle(.connectionLost(Self.calleeOne), now: Self.now)
        XCTAssertEqual(machine.armed, [.grace(.caller), .grace(.callee)])
        let actions = try machine.handle(.timerFired(.grace(.callee)), now: Self.now + 20_000)
        XCTAssertEqual(actions, [
            .cancel(.grace(.caller)),
            .send(.ended(.inactive, error: nil), to: .caller),
            .send(.ended(.inactive, error: nil), to: .answerer),
            .persist, .finish,
        ])
        XCTAssertEqual(machine.details.endCause, .inactive)
    }

    func testHangupWhileTheOtherPartyIsAwayEndsHungUp() throws {
        var machine = Self.machine(in: .established)
        _ = try machine.handle(.connectionLost(Self.calleeOne), now: Self.now)
        let actions = try machine.handle(.hangup(from: Self.caller, busy: false), now: Self.now)
        XCTAssertEqual(actions.first, .cancel(.grace(.callee)))
        XCTAssertEqual(machine.details.endCause, .hungUp)
        XCTAssertTrue(machine.armed.isEmpty)
    }

    func testStaleReachTimerAfterRingingDoesNothing() throws {
        var machine = Self.machine(in: .ringing)
        XCTAssertFalse(machine.armed.contains(.reach))
        XCTAssertEqual(try machine.handle(.timerFired(.reach), now: Self.startedAt + 10_000), [])
        XCTAssertEqual(machine.state, .ringing)
    }

    func testCalleeDeviceAnsweringBeforeTheOfferIsReportedStillGivesProgressFirst() throws {
        var machine = Self.machine(in: .initiating)
        let actions = try machine.handle(.answer(from: Self.calleeOne, sdp: "s"), now: Self.now)
        XCTAssertEqual(actions.first, .send(.progress, to: .caller))
        XCTAssertEqual(machine.details.progressedAt, Self.now)
        XCTAssertNil(machine.details.rungAt)
        // The late routing report changes nothing.
        XCTAssertEqual(try machine.handle(.offered(deviceCount: 2), now: Self.now), [])
        XCTAssertEqual(machine.state, .answered)
    }

    /// Random event sequences: the armed set always matches the arm/cancel actions, nothing
    /// happens after `finish`, and a refused request never changes the call.
    func testRandomSequencesKeepInvariants() {
        var generator = SplitMix64(seed: 0x5EED)
        let events = Self.allEvents.map(\.event)
        for _ in 0..<2_000 {
            var machine = CallStateMachine(callId: "c", caller: Self.caller, calleeId: "bob", video: false, timeouts: Self.timeouts, now: 0)
            var armed: Set<CallTimer> = []
            for action in machine.start() {
                if case .arm(let timer, _) = action { armed.insert(timer) }
            }
            var finished = false
            var now: Int64 = 0
            for _ in 0..<12 {
                now += Int64(generator.next() % 1_000)
                let event = events[Int(generator.next() % UInt64(events.count))]
                let before = machine
                let previousState = machine.state
                guard let actions = try? machine.handle(event, now: now) else {
                    XCTAssertEqual(machine, before)
                    continue
                }
                if finished {
                    XCTAssertEqual(actions, [], "actions after finish for \(event)")
                }
                if case .timerFired(let timer) = event { armed.remove(timer) }
                for action in actions {
                    switch action {
                    case .arm(let timer, _):
                        XCTAssertFalse(armed.contains(timer), "armed twice: \(timer)")
                        armed.insert(timer)
                    case .cancel(let timer):
                        XCTAssertTrue(armed.contains(timer), "cancelled an unarmed timer: \(timer)")
                        armed.remove(timer)
                    case .finish:
                        finished = true
                    default:
                        break
                    }
                }
                XCTAssertEqual(machine.armed, armed)
                XCTAssertGreaterThanOrEqual(CallState.allCases.firstIndex(of: machine.state)!, CallState.allCases.firstIndex(of: previousState)!, "state went backwards")
                if machine.state != previousState {
                    XCTAssertTrue(actions.contains(.persist), "state change without persist: \(previousState) → \(machine.state)")
                }
                XCTAssertEqual(finished, machine.state == .ended)
                if finished { XCTAssertTrue(armed.isEmpty) }
            }
        }
    }
}

/// A small deterministic generator for the random-sequence test.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
