/// The `code` of an `error` frame (and of REST error bodies); documented in docs/realtime-protocol.md.
public enum RealtimeErrorCode: String, Sendable, Equatable, CaseIterable {
    /// The frame is not a JSON object.
    case badJSON = "bad_json"
    /// A field is missing or has the wrong type or size; `error` names it.
    case badRequest = "bad_request"
    /// The frame's `type` is not one the server knows.
    case unknownType = "unknown_type"
    /// The first frame was not `hello` (the connection is closed with 4002).
    case helloRequired = "hello_required"
    /// No `hello` within the deadline (closed with 4003).
    case helloTimeout = "hello_timeout"
    /// A second `hello` on an open session.
    case alreadyAuthenticated = "already_authenticated"
    /// The session token is unknown, expired or revoked (closed with 4004; REST: 401).
    case invalidSession = "invalid_session"
    /// `deviceId` is missing or malformed (closed with 4002).
    case invalidDevice = "invalid_device"
    /// The user already has the maximum number of devices (closed with 4005).
    case tooManyDevices = "too_many_devices"
    /// More recipients than allowed.
    case tooManyRecipients = "too_many_recipients"
    /// `text` is longer than allowed.
    case textTooLong = "text_too_long"
    /// `headers` serialize to more bytes than allowed.
    case headersTooLarge = "headers_too_large"
    /// No recipient exists (per recipient this is the `reason` in `failed`).
    case userNotFound = "user_not_found"
    /// The user sends faster than the per-user rate limit.
    case rateLimited = "rate_limited"
    /// Too many requests waiting for an answer on this connection.
    case tooManyPending = "too_many_pending"
    /// Presence subscriptions past the per-connection limit.
    case tooManySubscriptions = "too_many_subscriptions"
    /// The database is unreachable or overloaded; retry later.
    case unavailable = "unavailable"
    /// An unexpected server error.
    case `internal` = "internal"
    /// The user's block list is full (`BlockList.maxBlocksPerUser`).
    case tooManyBlocks = "too_many_blocks"
    /// A `beforeMessage` Cloud Code hook refused the message; `error` is the hook's message.
    case rejected = "rejected"
    /// A `beforeMessage` hook could not be called (timeout, unreachable, bad answer) and hooks fail closed.
    case hookFailed = "hook_failed"

    // Calls (docs/realtime-protocol.md, "Calls"; produced by ParleyCalls through `RealtimeFrameHandler`).
    /// No such call, or not one this user takes part in.
    case callNotFound = "call_not_found"
    /// A `call.invite` reused the id of an existing call.
    case callExists = "call_exists"
    /// The call is over.
    case callEnded = "call_ended"
    /// `call.invite` to the caller's own user id.
    case cannotCallSelf = "cannot_call_self"
    /// Only a device of the callee may ring or answer.
    case notCallee = "not_callee"
    /// The call was answered and this device is not one of its two parties.
    case notParty = "not_a_party"
    /// Another device answered first.
    case alreadyAnswered = "already_answered"
    /// Allowed only after the answer.
    case notAnswered = "not_answered"
    /// The caller is at the concurrent-call limit.
    case tooManyCalls = "too_many_calls"
    /// A per-call bound (such as candidates held before the answer) is reached.
    case limitExceeded = "limit_exceeded"
}

/// Close codes the realtime service sends (4000–4999 are application codes in RFC 6455).
public enum RealtimeCloseCode {
    /// Another connection with the same user and deviceId replaced this one.
    public static let replaced: UInt16 = 4001
    /// Protocol violation before the session opened (first frame not a valid `hello`).
    public static let protocolViolation: UInt16 = 4002
    /// No `hello` within the deadline.
    public static let helloTimeout: UInt16 = 4003
    /// The session token is invalid or expired.
    public static let invalidSession: UInt16 = 4004
    /// The user has too many devices.
    public static let tooManyDevices: UInt16 = 4005
    /// The session was revoked or the user banned while connected.
    public static let sessionRevoked: UInt16 = 4006
    /// The session expired while connected (log in again).
    public static let sessionExpired: UInt16 = 4007
}
