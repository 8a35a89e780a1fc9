import ParleyJSON

/// Something that happens to a call: a device's frame, a routing result, a connection change
/// or a timer.
public enum CallEvent: Sendable, Equatable {
    // Routing results, reported by the executor after the invite.
    /// The callee user does not exist: `failure` with `user_not_found`.
    case calleeUnknown
    /// The callee is at the concurrent-call limit: `busy`.
    case calleeBusy
    /// `call.incoming` went to this many callee devices (live or queued); 0 means none.
    case offered(deviceCount: Int)
    /// The call cannot go on (e.g. storage failed): `failure` with `error`.
    case failed(error: String)
    /// A review refused the invite before any callee device was offered it (`CallHooks`).
    case refused(CallRefusal)

    // Frames from devices.
    case ringing(from: CallDevice)
    case answer(from: CallDevice, sdp: String)
    case established(from: CallDevice)
    /// ICE candidates to relay, as the client sent them.
    case candidates(from: CallDevice, candidates: [JSONValue])
    /// A re-offer or re-answer to relay, as the client sent it (`sdp`, `kind`).
    case negotiate(from: CallDevice, payload: JSONObject)
    /// `call.hangup`; `busy` when a callee device declines with busy.
    case hangup(from: CallDevice, busy: Bool)

    // Connections of the devices.
    case connectionLost(CallDevice)
    case connectionRestored(CallDevice)

    case timerFired(CallTimer)
}
