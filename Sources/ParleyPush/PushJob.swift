import ParleyJSON

/// A claimed push job with what is needed to build its notification.
public struct PushJob: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// An alert for messages of one conversation.
        case message
        /// An incoming call (VoIP on iOS).
        case call
        /// A push of the Parse push API (`POST /parse/push`): its `data` is the payload.
        case parse
    }

    /// gorush's platform numbers.
    public enum Platform: Int, Sendable {
        case ios = 1
        case android = 2
    }

    public var id: Int64
    public var kind: Kind
    public var userId: String
    public var deviceId: String
    public var platform: Platform
    public var token: String
    public var collapseKey: String
    /// The queued event it covers (nil: not tied to one).
    public var seq: Int64?
    /// This attempt's number (1 for the first).
    public var attempt: Int
    /// Unix milliseconds.
    public var createdAt: Int64
    /// The message's sender or the caller.
    public var sender: String?
    /// The sender's display field (`PushConfiguration.titleField`).
    public var senderName: String?
    /// The latest message of the conversation and how many the push covers.
    public var messageId: String?
    public var messageText: String?
    public var messageCount: Int
    public var callId: String?
    /// callId, from, video, headers (calls); the Parse push `data` (kind `parse`).
    public var callPayload: JSONObject?
    /// Unix milliseconds.
    public var expiresAt: Int64?
    /// Why the push is no longer needed, decided when it was claimed.
    public var moot: Moot?

    public enum Moot: Sendable, Equatable {
        /// The call's expiresAt passed.
        case expired
        /// The call ended.
        case callEnded
        /// The device acknowledged the events the push was about.
        case delivered
    }

    public init(id: Int64, kind: Kind, userId: String, deviceId: String, platform: Platform, token: String, collapseKey: String,
                seq: Int64? = nil, attempt: Int = 1, createdAt: Int64 = 0, sender: String? = nil, senderName: String? = nil,
                messageId: String? = nil, messageText: String? = nil, messageCount: Int = 1, callId: String? = nil,
                callPayload: JSONObject? = nil, expiresAt: Int64? = nil, moot: Moot? = nil) {
        self.id = id
        self.kind = kind
        self.userId = userId
        self.deviceId = deviceId
        self.platform = platform
        self.token = token
        self.collapseKey = collapseKey
        self.seq = seq
        self.attempt = attempt
        self.createdAt = createdAt
        self.sender = sender
        self.senderName = senderName
        self.messageId = messageId
        self.messageText = messageText
        self.messageCount = messageCount
        self.callId = callId
        self.callPayload = callPayload
        self.expiresAt = expiresAt
        self.moot = moot
    }
}

/// What became of one attempt.
public enum PushOutcome: Sendable, Equatable {
    /// The gateway accepted it.
    case sent
    /// Failed; try again after `delay` (dead when the attempts are used up).
    case retry(error: String, delay: Duration)
    /// The gateway rejected the token (removed from the installation).
    case rejected(error: String)
    /// No gateway is configured.
    case skipped
    /// No longer needed.
    case canceled(reason: String)
    case expired

    /// The job's state after this outcome (`retry` may also end `dead`).
    var state: String {
        switch self {
        case .sent: "sent"
        case .retry: "retry"
        case .rejected: "rejected"
        case .skipped: "skipped"
        case .canceled: "canceled"
        case .expired: "expired"
        }
    }

    var error: String {
        switch self {
        case .retry(let error, _), .rejected(let error): error
        case .canceled(let reason): reason
        case .expired: "the call expired before the push was sent"
        case .sent, .skipped: ""
        }
    }
}
