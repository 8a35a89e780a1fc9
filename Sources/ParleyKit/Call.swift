import ParleyJSON

/// Which side of a call this device is on.
public enum CallDirection: String, Sendable {
    case outgoing, incoming
}

/// What happens to a call, in order: as `Call.events` and as `CallDelegate` calls.
public enum CallEvent: Sendable, Equatable {
    case stateChanged(CallState)
    /// The other party's SDP: the answer to our offer, the offer of an incoming call, or a re-negotiation.
    case remoteDescription(sdp: String, kind: SDPKind)
    /// ICE candidates from the other party, for the WebRTC stack.
    case remoteCandidates([JSONValue])
    /// The call is over (always the last event).
    case ended(CallEndCause, error: String?, details: CallDetails?)
}

/// Told what happens to a call (the Sinch `SINCallDelegate` counterpart). Called in order,
/// from the SDK's delivery task.
public protocol CallDelegate: AnyObject, Sendable {
    func call(_ call: Call, didChangeState state: CallState)
    func call(_ call: Call, didReceiveRemoteDescription sdp: String, kind: SDPKind)
    func call(_ call: Call, didReceiveRemoteCandidates candidates: [JSONValue])
    func call(_ call: Call, didEndWith cause: CallEndCause, error: String?, details: CallDetails?)
}

extension CallDelegate {
    public func call(_ call: Call, didChangeState state: CallState) {}
    public func call(_ call: Call, didReceiveRemoteDescription sdp: String, kind: SDPKind) {}
    public func call(_ call: Call, didReceiveRemoteCandidates candidates: [JSONValue]) {}
    public func call(_ call: Call, didEndWith cause: CallEndCause, error: String?, details: CallDetails?) {}
}

/// The app's WebRTC stack as the SDK sees it: SDP and candidates in and out. ParleyKit has no
/// WebRTC dependency; an app wraps its `RTCPeerConnection` (or anything else) in this.
public protocol CallMediaSession: AnyObject, Sendable {
    /// The local offer for a new outgoing call.
    func makeOffer(for call: Call) async throws -> String
    /// The other party's SDP (an incoming call's offer, the answer to ours, a re-negotiation).
    func setRemoteDescription(_ sdp: String, kind: SDPKind, for call: Call) async
    /// The other party's ICE candidates.
    func addRemoteCandidates(_ candidates: [JSONValue], for call: Call) async
    /// The call ended: release its media.
    func close(_ call: Call) async
}

/// One call, outgoing or incoming (the Sinch `SINCall` counterpart).
///
/// Its state is readable from any thread (a CallKit provider callback); requests go out over
/// the client's socket. Events arrive in order on `events` (one consumer) and on `delegate`.
public final class Call: Sendable {
    /// The call id on the wire (a UUID, lower case for calls made here).
    public let callId: String
    /// The UUID CallKit / LiveCommunicationKit know this call by: the call id itself.
    public let uuid: ParleyUUID
    public let direction: CallDirection
    /// The caller of an incoming call, the callee of an outgoing one.
    public let remoteUserId: String
    /// Events, in order; finishes after `.ended`.
    public let events: AsyncStream<CallEvent>

    let client: ParleyClient
    private let eventSink: AsyncStream<CallEvent>.Continuation
    private let record: ParleyLock<Record>

    struct Record {
        var state = CallState.initiating
        var video: Bool
        var headers: JSONObject
        var endCause: CallEndCause?
        var error: String?
        var details: CallDetails?
        var remoteOffer: String?
        var answeredDeviceId: String?
        var callerName: String?
        var expiresAt: String?
        weak var delegate: (any CallDelegate)?
        var offerWaiters: [CheckedContinuation<String, any Error>] = []
    }

    init(callId: String, direction: CallDirection, remoteUserId: String, video: Bool, headers: JSONObject, client: ParleyClient) {
        self.callId = callId
        uuid = ParleyUUID(callId) ?? ParleyUUID.random()
        self.direction = direction
        self.remoteUserId = remoteUserId
        self.client = client
        record = ParleyLock(Record(video: video, headers: headers))
        (events, eventSink) = AsyncStream.makeStream(of: CallEvent.self, bufferingPolicy: .bufferingNewest(1024))
    }

    public var state: CallState { record.withLock { $0.state } }
    public var video: Bool { record.withLock { $0.video } }
    /// The invite's headers (complete once `call.incoming` arrived).
    public var headers: JSONObject { record.withLock { $0.headers } }
    public var endCause: CallEndCause? { record.withLock { $0.endCause } }
    /// Why a `failure` happened (`user_not_found`, `unavailable`, …).
    public var error: String? { record.withLock { $0.error } }
    /// The record the server sent with `call.ended`.
    public var details: CallDetails? { record.withLock { $0.details } }
    /// An incoming call's offer, once `call.incoming` arrived.
    public var remoteOffer: String? { record.withLock { $0.remoteOffer } }
    /// The callee device that answered (outgoing calls).
    public var answeredDeviceId: String? { record.withLock { $0.answeredDeviceId } }
    /// The caller's display name from the VoIP push, if any.
    public var callerName: String? { record.withLock { $0.callerName } }
    public var expiresAt: String? { record.withLock { $0.expiresAt } }

    public var delegate: (any CallDelegate)? {
        get { record.withLock { $0.delegate } }
        set { record.withLock { $0.delegate = newValue } }
    }

    // MARK: Requests

    /// Answers an incoming call with the local SDP answer. Waits for the connection if the call
    /// was reported from a push before the socket was up.
    public func answer(sdp: String) async throws(ParleyError) {
        guard direction == .incoming else { throw .invalidArgument("only an incoming call can be answered") }
        _ = try await remoteOfferSDP()
        _ = try await client.callRequest("call.answer", callId: callId, fields: ["sdp": .string(sdp)], waitForConnection: true)
        await client.applyLocal(self, .answered)
    }

    /// Declines an incoming call before it is answered (`denied`, or `busy`).
    public func decline(busy: Bool = false) async throws(ParleyError) {
        guard direction == .incoming else { throw .invalidArgument("only an incoming call can be declined") }
        try await end(fields: busy ? ["reason": "busy"] : [:])
    }

    /// Ends the call: cancels an outgoing one before the answer, declines an incoming one
    /// before the answer, hangs up an answered one. Offline, the call ends here at once and the
    /// server's timers end it there.
    public func hangup() async throws(ParleyError) {
        try await end(fields: [:])
    }

    /// Sends local ICE candidates (1–64 per call of this method; strings or objects).
    public func sendCandidates(_ candidates: [JSONValue]) async throws(ParleyError) {
        guard !candidates.isEmpty else { return }
        for start in stride(from: 0, to: candidates.count, by: 64) {
            let chunk = Array(candidates[start..<min(candidates.count, start + 64)])
            _ = try await client.callRequest("call.candidates", callId: callId, fields: ["candidates": .array(chunk)])
        }
    }

    /// Sends a re-offer or re-answer after the answer (e.g. an ICE restart).
    public func renegotiate(sdp: String, kind: SDPKind) async throws(ParleyError) {
        _ = try await client.callRequest("call.negotiate", callId: callId, fields: ["sdp": .string(sdp), "kind": .string(kind.rawValue)])
    }

    /// Tells the server (and the other party) that media is up.
    public func reportEstablished() async throws(ParleyError) {
        _ = try await client.callRequest("call.established", callId: callId, fields: [:])
    }

    /// An incoming call's offer: at once if `call.incoming` arrived, else when it does (after a
    /// push, the replay brings it); throws if the call ends first.
    public func remoteOfferSDP() async throws(ParleyError) -> String {
        try await withParleyContinuation { continuation in
            let ready: Result<String, ParleyError>? = record.withLock { record in
                if let offer = record.remoteOffer { return .success(offer) }
                if record.state == .ended { return .failure(.server(code: "call_ended", message: "the call ended")) }
                record.offerWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    private func end(fields: JSONObject) async throws(ParleyError) {
        guard state != .ended else { return }
        do {
            _ = try await client.callRequest("call.hangup", callId: callId, fields: fields)
        } catch .notConnected {
            let cause: CallEndCause = state >= .answered ? .hungUp : (direction == .outgoing ? .canceled : (fields.isEmpty ? .denied : .busy))
            await client.applyLocal(self, .ended(cause, error: nil, details: nil))
        } catch .server(let code, _) where code == "call_ended" || code == "call_not_found" {
            return
        }
    }

    // MARK: Events (called by the client, in order)

    /// Applies a server event of `type`; returns what changed.
    func apply(type: String, fields: JSONObject) -> [CallEvent] {
        var events: [CallEvent] = []
        var waiters: [CheckedContinuation<String, any Error>] = []
        var offer: String?
        record.withLock { record in
            guard record.state != .ended else { return }
            func advance(to state: CallState) {
                if record.state < state {
                    record.state = state
                    events.append(.stateChanged(state))
                }
            }
            switch type {
            case "call.incoming":
                if let video = fields["video"]?.bool { record.video = video }
                if let headers = fields["headers"]?.object { record.headers = headers }
                if let expiresAt = fields["expiresAt"]?.string { record.expiresAt = expiresAt }
                if record.remoteOffer == nil, let sdp = fields["sdp"]?.string {
                    record.remoteOffer = sdp
                    offer = sdp
                    waiters = record.offerWaiters
                    record.offerWaiters = []
                    events.append(.remoteDescription(sdp: sdp, kind: .offer))
                }
                advance(to: .progressing)
            case "call.progress":
                advance(to: .progressing)
            case "call.ringing":
                advance(to: .ringing)
            case "call.answered":
                record.answeredDeviceId = fields["deviceId"]?.string
                if let sdp = fields["sdp"]?.string { events.append(.remoteDescription(sdp: sdp, kind: .answer)) }
                advance(to: .answered)
            case "call.established":
                advance(to: .established)
            case "call.candidates":
                if let candidates = fields["candidates"]?.array, !candidates.isEmpty { events.append(.remoteCandidates(candidates)) }
            case "call.negotiate":
                if let sdp = fields["sdp"]?.string, let kind = fields["kind"]?.string.flatMap(SDPKind.init(rawValue:)) {
                    events.append(.remoteDescription(sdp: sdp, kind: kind))
                }
            case "call.ended":
                let details = fields["details"]?.object.flatMap(CallDetails.init)
                let cause = fields["endCause"]?.string.flatMap(CallEndCause.init(rawValue:)) ?? .failure
                events.append(contentsOf: end(&record, cause: cause, error: fields["error"]?.string, details: details, waiters: &waiters))
            default:
                break
            }
        }
        if let offer { for waiter in waiters { waiter.resume(returning: offer) } } else { failWaiters(waiters) }
        return events
    }

    /// Applies a change decided on this device (an `ok` to our request, a local end).
    func applyLocal(_ change: LocalChange) -> [CallEvent] {
        var events: [CallEvent] = []
        var waiters: [CheckedContinuation<String, any Error>] = []
        record.withLock { record in
            guard record.state != .ended else { return }
            switch change {
            case .ringing, .answered:
                let target: CallState = change == .ringing ? .ringing : .answered
                if record.state < target {
                    record.state = target
                    events.append(.stateChanged(target))
                }
            case .ended(let cause, let error, let details):
                events.append(contentsOf: end(&record, cause: cause, error: error, details: details, waiters: &waiters))
            }
        }
        failWaiters(waiters)
        return events
    }

    enum LocalChange: Equatable {
        case ringing
        case answered
        case ended(CallEndCause, error: String?, details: CallDetails?)
    }

    /// Fills in what a VoIP push told about the call.
    func applyPush(_ payload: VoIPPushPayload) {
        record.withLock { record in
            record.callerName = payload.callerName
            record.expiresAt = payload.expiresAt
            if !payload.headersOmitted && record.headers.isEmpty { record.headers = payload.headers }
        }
    }

    private func end(_ record: inout Record, cause: CallEndCause, error: String?, details: CallDetails?,
                     waiters: inout [CheckedContinuation<String, any Error>]) -> [CallEvent] {
        record.state = .ended
        record.endCause = cause
        record.error = error
        record.details = details
        waiters = record.offerWaiters
        record.offerWaiters = []
        return [.stateChanged(.ended), .ended(cause, error: error, details: details)]
    }

    private func failWaiters(_ waiters: [CheckedContinuation<String, any Error>]) {
        for waiter in waiters { waiter.resume(throwing: ParleyError.server(code: "call_ended", message: "the call ended")) }
    }

    /// Hands events to the stream and the delegate (the client's delivery task calls this).
    func publish(_ events: [CallEvent]) {
        let delegate = self.delegate
        for event in events {
            eventSink.yield(event)
            switch event {
            case .stateChanged(let state): delegate?.call(self, didChangeState: state)
            case .remoteDescription(let sdp, let kind): delegate?.call(self, didReceiveRemoteDescription: sdp, kind: kind)
            case .remoteCandidates(let candidates): delegate?.call(self, didReceiveRemoteCandidates: candidates)
            case .ended(let cause, let error, let details):
                delegate?.call(self, didEndWith: cause, error: error, details: details)
                eventSink.finish()
            }
        }
    }
}
