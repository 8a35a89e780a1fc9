import ParleyJSON

/// Why an invite is refused before the callee rings: the caller gets `call.ended` with `cause`
/// (`denied` or `failure`) and `error`.
public struct CallRefusal: Sendable, Equatable {
    public var cause: CallEndCause
    public var error: String?

    public init(cause: CallEndCause, error: String?) {
        self.cause = cause
        self.error = error
    }
}

/// An invite as a `beforeCall` review sees it.
public struct CallInviteReview: Sendable, Equatable {
    public var callId: String
    public var caller: CallDevice
    public var calleeId: String
    public var video: Bool
    public var headers: JSONObject
}

/// Extension point for what may refuse an invite (the block list, a `beforeCall` webhook) and
/// what is told when a call ends (`afterCallEnded`); the server wires it in.
public protocol CallHooks: Sendable {
    /// False when it is known from memory that nothing would refuse this invite (no review, no task).
    func mustReview(caller: String, callee: String) -> Bool
    /// Reviews an invite: nil lets it ring.
    func review(_ invite: CallInviteReview) async -> CallRefusal?
    /// A call ended (its `details` as `call.ended` carries them); called on the call's loop, must not block.
    func callEnded(_ details: JSONObject)
}
