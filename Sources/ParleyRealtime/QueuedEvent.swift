import ParleyJSON

/// A stored message as devices receive it.
public struct MessageRecord: Sendable, Equatable {
    public var id: String
    public var from: String
    public var to: [String]
    public var text: String
    /// The headers as JSON object text.
    public var headersJSON: String
    /// Unix milliseconds.
    public var sentAt: Int64

    public init(id: String, from: String, to: [String], text: String, headersJSON: String, sentAt: Int64) {
        self.id = id
        self.from = from
        self.to = to
        self.text = text
        self.headersJSON = headersJSON
        self.sentAt = sentAt
    }
}

/// What a queued event says, without its per-device seq.
public enum QueuedEventBody: Sendable, Equatable {
    /// `message`.
    case message(MessageRecord)
    /// `receipt` of `kind` (`delivered` or `read`) by `userId` for `messageId`, at Unix ms `at`.
    case receipt(kind: String, messageId: String, userId: String, at: Int64)
    /// Any other event (calls): the object's `type` is the frame type; `seq` is added on delivery.
    case custom(JSONObject)
}

/// One event of one device's queue.
public struct QueuedEvent: Sendable, Equatable {
    public var seq: Int64
    public var body: QueuedEventBody

    public init(seq: Int64, body: QueuedEventBody) {
        self.seq = seq
        self.body = body
    }
}
