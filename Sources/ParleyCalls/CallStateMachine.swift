import ParleyJSON

/// One call's signalling logic, without I/O: events in, actions out.
///
/// The executor (`CallService`) feeds it device frames, routing results, connection changes
/// and timer firings, and carries out the returned actions in order (send, arm/cancel timers,
/// persist, finish). A request the call refuses throws and changes nothing. The machine never
/// reads a clock: `now` (milliseconds since the Unix epoch) comes with each event.
///
/// States only move forward: initiating → progressing → ringing → answered → established →
/// ended, possibly skipping some (a device may answer without ringing; any state may end).
public struct CallStateMachine: Sendable, Equatable {
    /// Candidates the caller may send before the answer; they are held and handed to the
    /// answering device with the answer.
    public static let maxBufferedCandidates = 256

    public let callId: String
    /// The caller's device (the one that sent the invite).
    public let caller: CallDevice
    public let calleeId: String
    public let timeouts: CallTimeouts
    public private(set) var state: CallState = .initiating
    public private(set) var details: CallDetails
    /// The callee device whose `call.answer` won.
    public private(set) var answerer: CallDevice?
    /// Timers armed and not yet fired or cancelled.
    public private(set) var armed: Set<CallTimer> = []
    /// Parties whose connection is lost (after the answer), waiting out the grace period.
    public private(set) var absent: Set<CallSide> = []
    /// Caller candidates held until the answer.
    public private(set) var bufferedCandidates: [JSONValue] = []
    private var started = false

    /// Who a device is to this call.
    enum Role {
        case caller, callerOtherDevice, callee, stranger
    }

    public init(callId: String, caller: CallDevice, calleeId: String, video: Bool, timeouts: CallTimeouts, now: Int64) {
        self.callId = callId
        self.caller = caller
        self.calleeId = calleeId
        self.timeouts = timeouts
        self.details = CallDetails(startedAt: now, video: video)
    }

    /// When a queued `call.incoming` stops being delivered: the longest an unanswered call lives.
    public var expiresAt: Int64 { details.startedAt + timeouts.lifetime.milliseconds }

    /// Starts the call once it is stored: arms the reach timer and offers it to the callee.
    public mutating func start() -> [CallAction] {
        precondition(!started && state == .initiating, "call \(callId) started twice")
        started = true
        return arm(.reach, after: timeouts.reach) + [.offer(expiresAt: expiresAt)]
    }

    /// Handles one event. Throws (and changes nothing) when a device's request is refused;
    /// routing, connection and timer events never throw.
    public mutating func handle(_ event: CallEvent, now: Int64) throws(CallError) -> [CallAction] {
        switch event {
        case .calleeUnknown:
            guard state == .initiating else { return [] }
            return end(.failure, error: "user_not_found", now: now, notifyCallee: false)
        case .calleeBusy:
            guard state == .initiating else { return [] }
            return end(.busy, error: nil, now: now, notifyCallee: false)
        case .offered(let deviceCount):
            guard state == .initiating, deviceCount > 0 else { return [] }
            var actions = markProgressed(now: now)
            state = .progressing
            actions.append(.persist)
            return actions
        case .failed(let error):
            guard state != .ended else { return [] }
            return end(.failure, error: error, now: now)
        case .refused(let refusal):
            guard state == .initiating else { return [] }
            return end(refusal.cause, error: refusal.error, now: now, notifyCallee: false)
        case .ringing(let device):
            return try ringing(from: device, now: now)
        case .answer(let device, let sdp):
            return try answer(from: device, sdp: sdp, now: now)
        case .established(let device):
            return try established(from: device, now: now)
        case .candidates(let device, let candidates):
            return try relayCandidates(from: device, candidates)
        case .negotiate(let device, let payload):
            return try relayNegotiation(from: device, payload)
        case .hangup(let device, let busy):
            return try hangup(from: device, busy: busy, now: now)
        case .connectionLost(let device):
            return connectionLost(device, now: now)
        case .connectionRestored(let device):
            guard state.isAnswered, let side = partySide(of: device), absent.contains(side) else { return [] }
            absent.remove(side)
            return cancel(.grace(side))
        case .timerFired(let timer):
            return timerFired(timer, now: now)
        }
    }

    // MARK: Device requests

    private mutating func ringing(from device: CallDevice, now: Int64) throws(CallError) -> [CallAction] {
        guard state != .ended else { throw .callEnded }
        guard role(of: device) == .callee else { throw .notCallee }
        guard state == .initiating || state == .progressing else { return [] }
        var actions = markProgressed(now: now)
        state = .ringing
        details.rungAt = now
        actions += cancel(.reach)
        actions += arm(.ring, after: timeouts.ring)
        actions.append(.send(.ringing, to: .caller))
        actions.append(.persist)
        return actions
    }

    private mutating func answer(from device: CallDevice, sdp: String, now: Int64) throws(CallError) -> [CallAction] {
        guard state != .ended else { throw .callEnded }
        guard role(of: device) == .callee else { throw .notCallee }
        guard !state.isAnswered else { throw .alreadyAnswered }
        var actions = markProgressed(now: now)
        state = .answered
        answerer = device
        details.answeredAt = now
        actions += cancel(.reach)
        actions += cancel(.ring)
        actions.append(.send(.answered(sdp: sdp, deviceId: device.deviceId), to: .caller))
        actions.append(.send(.ended(.otherDeviceAnswered, error: nil), to: .calleeDevices(except: device.deviceId)))
        if !bufferedCandidates.isEmpty {
            actions.append(.send(.candidates(bufferedCandidates), to: .answerer))
            bufferedCandidates = []
        }
        actions.append(.persist)
        return actions
    }

    private mutating func established(from device: CallDevice, now: Int64) throws(CallError) -> [CallAction] {
        _ = try answeredParty(device)
        guard state == .answered else { return [] }
        state = .established
        details.establishedAt = now
        return [.send(.established, to: .caller), .send(.established, to: .answerer), .persist]
    }

    private mutating func relayCandidates(from device: CallDevice, _ candidates: [JSONValue]) throws(CallError) -> [CallAction] {
        guard state != .ended else { throw .callEnded }
        if !state.isAnswered, role(of: device) == .caller {
            guard bufferedCandidates.count + candidates.count <= Self.maxBufferedCandidates else {
                throw .limitExceeded("at most \(Self.maxBufferedCandidates) candidates before the answer")
            }
            bufferedCandidates += candidates
            return []
        }
        let side = try answeredParty(device)
        return [.send(.candidates(candidates), to: side == .caller ? .answerer : .caller)]
    }

    private mutating func relayNegotiation(from device: CallDevice, _ payload: JSONObject) throws(CallError) -> [CallAction] {
        let side = try answeredParty(device)
        return [.send(.negotiate(payload), to: side == .caller ? .answerer : .caller)]
    }

    private mutating func hangup(from device: CallDevice, busy: Bool, now: Int64) throws(CallError) -> [CallAction] {
        guard state != .ended else { throw .callEnded }
        if state.isAnswered {
            _ = try answeredParty(device)
            return end(.hungUp, error: nil, now: now)
        }
        switch role(of: device) {
        case .caller:
            return end(.canceled, error: nil, now: now)
        case .callee:
            return end(busy ? .busy : .denied, error: nil, now: now)
        case .callerOtherDevice, .stranger:
            throw .notParty
        }
    }

    // MARK: Connections and timers

    private mutating func connectionLost(_ device: CallDevice, now: Int64) -> [CallAction] {
        switch state {
        case .initiating, .progressing, .ringing:
            // Nobody could take the answer: the caller's device is gone.
            guard device == caller else { return [] }
            return end(.inactive, error: nil, now: now)
        case .answered, .established:
            guard let side = partySide(of: device), !absent.contains(side) else { return [] }
            absent.insert(side)
            return arm(.grace(side), after: timeouts.grace)
        case .ended:
            return []
        }
    }

    private mutating func timerFired(_ timer: CallTimer, now: Int64) -> [CallAction] {
        guard armed.remove(timer) != nil else { return [] }
        switch timer {
        case .reach:
            guard state == .initiating || state == .progressing else { return [] }
            return end(.timeout, error: nil, now: now)
        case .ring:
            guard state == .ringing else { return [] }
            return end(.noAnswer, error: nil, now: now)
        case .grace(let side):
            guard state.isAnswered, absent.contains(side) else { return [] }
            return end(.inactive, error: nil, now: now)
        }
    }

    // MARK: Helpers

    private mutating func end(_ cause: CallEndCause, error: String?, now: Int64, notifyCallee: Bool = true) -> [CallAction] {
        var actions: [CallAction] = []
        for timer in [CallTimer.reach, .ring, .grace(.caller), .grace(.callee)] where armed.contains(timer) {
            actions.append(.cancel(timer))
        }
        armed = []
        let wasAnswered = state.isAnswered
        state = .ended
        details.endedAt = now
        details.endCause = cause
        details.error = error
        bufferedCandidates = []
        actions.append(.send(.ended(cause, error: error), to: .caller))
        if wasAnswered {
            actions.append(.send(.ended(cause, error: error), to: .answerer))
        } else if notifyCallee {
            actions.append(.send(.ended(cause, error: error), to: .calleeDevices(except: nil)))
        }
        actions.append(.persist)
        actions.append(.finish)
        return actions
    }

    /// Records progress on the way to ringing or an answer (the caller always sees
    /// `call.progress` first).
    private mutating func markProgressed(now: Int64) -> [CallAction] {
        guard state == .initiating else { return [] }
        details.progressedAt = now
        return [.send(.progress, to: .caller)]
    }

    private mutating func arm(_ timer: CallTimer, after delay: Duration) -> [CallAction] {
        armed.insert(timer)
        return [.arm(timer, after: delay)]
    }

    private mutating func cancel(_ timer: CallTimer) -> [CallAction] {
        guard armed.remove(timer) != nil else { return [] }
        return [.cancel(timer)]
    }

    func role(of device: CallDevice) -> Role {
        if device == caller { return .caller }
        if device.userId == caller.userId { return .callerOtherDevice }
        if device.userId == calleeId { return .callee }
        return .stranger
    }

    /// The side `device` is on once the call is answered, nil when it is neither party.
    func partySide(of device: CallDevice) -> CallSide? {
        if device == caller { return .caller }
        if let answerer, device == answerer { return .callee }
        return nil
    }

    /// The side of a party of an answered call; refuses others with the clearest reason.
    private func answeredParty(_ device: CallDevice) throws(CallError) -> CallSide {
        guard state != .ended else { throw .callEnded }
        guard state.isAnswered else {
            switch role(of: device) {
            case .caller, .callee: throw .notAnswered
            case .callerOtherDevice, .stranger: throw .notParty
            }
        }
        guard let side = partySide(of: device) else { throw .notParty }
        return side
    }
}
