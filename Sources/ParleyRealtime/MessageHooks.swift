import ParleyJSON

/// Which message hooks apply (`MessageHooks.registered`).
public struct MessageHookSet: Sendable, Equatable {
    /// A `beforeMessage` webhook reviews each message before it is committed.
    public var before: Bool
    /// An `afterMessage` webhook is told of each committed message (durably, at least once).
    public var after: Bool

    public init(before: Bool, after: Bool) {
        self.before = before
        self.after = after
    }

    public static let none = MessageHookSet(before: false, after: false)
}

/// A message about to be committed, as a `beforeMessage` hook sees it.
public struct OutgoingMessage: Sendable, Equatable {
    public var from: String
    /// The sending device; nil for REST.
    public var deviceId: String?
    public var request: SendMessageRequest
}

/// A `beforeMessage` verdict.
public enum MessageVerdict: Sendable, Equatable {
    /// Commit the message as sent.
    case accept
    /// Commit this text and headers (JSON object text) instead.
    case rewrite(text: String, headers: JSONObject?)
    /// Refuse it: the sender gets this failure (`rejected` with the hook's message, or
    /// `hook_failed`); nothing is stored.
    case refuse(RealtimeFailure)
}

/// Extension point for Cloud Code on messages (the server wires ParleyCloud's webhooks in):
/// called for every send, REST and socket alike, after the block list and before the group commit.
public protocol MessageHooks: Sendable {
    /// The hooks that apply, when known without a read (a cached hook table); nil otherwise.
    func registeredFromMemory() -> MessageHookSet?
    /// The hooks that apply (may read the hook table).
    func registered() async -> MessageHookSet
    /// Reviews one message (`beforeMessage`).
    func beforeMessage(_ message: OutgoingMessage) async -> MessageVerdict
    /// Records, durably, that `message` was committed (`afterMessage`); returns once recorded.
    func afterMessage(_ message: MessageRecord) async
}
