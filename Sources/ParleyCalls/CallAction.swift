import ParleyJSON

/// Where a call event goes.
public enum CallRecipient: Sendable, Hashable {
    /// The caller's device (the one that sent the invite).
    case caller
    /// The callee device that answered.
    case answerer
    /// Every device of the callee (live ones directly, ones offered while offline through their
    /// queue), except `except`.
    case calleeDevices(except: String?)
}

/// What a call tells a device.
public enum CallMessage: Sendable, Equatable {
    case progress
    case ringing
    case answered(sdp: String, deviceId: String)
    case established
    case candidates([JSONValue])
    case negotiate(JSONObject)
    /// `call.ended` with this recipient's end cause (and the call's details).
    case ended(CallEndCause, error: String?)

    /// The frame's `type`.
    public var type: String {
        switch self {
        case .progress: "call.progress"
        case .ringing: "call.ringing"
        case .answered: "call.answered"
        case .established: "call.established"
        case .candidates: "call.candidates"
        case .negotiate: "call.negotiate"
        case .ended: "call.ended"
        }
    }
}

/// What the executor must do after the state machine handled an event, in order.
public enum CallAction: Sendable, Equatable {
    /// Deliver `call.incoming` to every callee device (queued for offline ones until
    /// `expiresAt`), then report `.offered(deviceCount:)` (or `.calleeUnknown`/`.calleeBusy`).
    case offer(expiresAt: Int64)
    case send(CallMessage, to: CallRecipient)
    case arm(CallTimer, after: Duration)
    case cancel(CallTimer)
    /// Store the current snapshot (details, state, parties).
    case persist
    /// The call is over: release its id, its devices and the users' concurrent-call slots.
    case finish
}
