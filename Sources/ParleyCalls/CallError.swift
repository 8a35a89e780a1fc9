/// Why a call request was refused; `code` goes into the socket's `error` reply.
public enum CallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The frame is malformed or a field is out of bounds.
    case invalidRequest(String)
    /// No call with that id (or not one this user takes part in).
    case callNotFound
    /// An invite reused the id of an existing call.
    case callExists
    /// The call is over.
    case callEnded
    /// `to` is the caller.
    case cannotCallSelf
    /// Only a device of the callee may ring or answer.
    case notCallee
    /// The call was answered and this device is not one of its two parties.
    case notParty
    /// Another device (or this one) answered first.
    case alreadyAnswered
    /// Allowed only after the answer.
    case notAnswered
    /// The caller is at the concurrent-call limit.
    case tooManyCalls
    /// A per-call bound (e.g. buffered candidates) is reached.
    case limitExceeded(String)
    /// Storage failed; the request may be retried.
    case unavailable

    /// The wire code.
    public var code: String {
        switch self {
        case .invalidRequest: "bad_request"
        case .callNotFound: "call_not_found"
        case .callExists: "call_exists"
        case .callEnded: "call_ended"
        case .cannotCallSelf: "cannot_call_self"
        case .notCallee: "not_callee"
        case .notParty: "not_a_party"
        case .alreadyAnswered: "already_answered"
        case .notAnswered: "not_answered"
        case .tooManyCalls: "too_many_calls"
        case .limitExceeded: "limit_exceeded"
        case .unavailable: "unavailable"
        }
    }

    /// The human-readable message sent with the code.
    public var description: String {
        switch self {
        case .invalidRequest(let reason): reason
        case .callNotFound: "no such call"
        case .callExists: "a call with this callId already exists"
        case .callEnded: "the call has ended"
        case .cannotCallSelf: "cannot call yourself"
        case .notCallee: "only a device of the callee can do this"
        case .notParty: "this device is not a party to the answered call"
        case .alreadyAnswered: "the call was already answered"
        case .notAnswered: "the call has not been answered yet"
        case .tooManyCalls: "too many concurrent calls"
        case .limitExceeded(let what): "limit exceeded: \(what)"
        case .unavailable: "storage unavailable, try again"
        }
    }

    /// The error with this wire code (as another node replied it); `unavailable` for an unknown code.
    init(code: String, message: String) {
        switch code {
        case "bad_request": self = .invalidRequest(message)
        case "call_not_found": self = .callNotFound
        case "call_exists": self = .callExists
        case "call_ended": self = .callEnded
        case "cannot_call_self": self = .cannotCallSelf
        case "not_callee": self = .notCallee
        case "not_a_party": self = .notParty
        case "already_answered": self = .alreadyAnswered
        case "not_answered": self = .notAnswered
        case "too_many_calls": self = .tooManyCalls
        case "limit_exceeded": self = .limitExceeded(message.hasPrefix("limit exceeded: ") ? String(message.dropFirst(16)) : message)
        default: self = .unavailable
        }
    }
}
