/// The outcome of a stored (or already stored) message.
public struct SendResult: Sendable, Equatable {
    public var messageId: String
    /// Unix milliseconds.
    public var sentAt: Int64
    /// Recipients that exist and got the message.
    public var recipients: [String]
    /// Recipients that do not exist (`user_not_found`).
    public var failed: [String]
    /// The clientMessageId was sent before: this is the earlier message; nothing was delivered again.
    public var duplicate: Bool
}
