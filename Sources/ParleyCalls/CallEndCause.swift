/// Why a call ended (or, for `otherDeviceAnswered`, why it ended for one callee device).
public enum CallEndCause: String, Sendable, Hashable, CaseIterable {
    /// The caller hung up before an answer.
    case canceled
    /// A callee device declined.
    case denied
    /// A callee device declined with "busy", or the callee was at the concurrent-call limit.
    case busy
    /// Callee devices rang but none answered within the ring timeout.
    case noAnswer
    /// No callee device reported ringing within the reach timeout.
    case timeout
    /// A party hung up after the answer.
    case hungUp
    /// Sent to the callee devices that did not answer; never the call's own end cause.
    case otherDeviceAnswered
    /// A party's connection was lost and did not come back in time.
    case inactive
    /// The call could not proceed; `error` says why (e.g. `user_not_found`).
    case failure
}
