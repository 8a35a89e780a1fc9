/// Where a call is in its life; it only moves forward.
public enum CallState: String, Sendable, Hashable, CaseIterable {
    /// Invite accepted; no callee device reached yet.
    case initiating
    /// The invite was routed to at least one callee device (live or queued for push).
    case progressing
    /// A callee device reported that it rings.
    case ringing
    /// A callee device answered; the caller has its SDP answer.
    case answered
    /// A side reported media up.
    case established
    /// Over; `CallDetails.endCause` says why.
    case ended

    /// Whether a callee device has answered (and the call has two fixed parties).
    public var isAnswered: Bool { self == .answered || self == .established }
}
