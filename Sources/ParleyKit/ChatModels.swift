import ParleyJSON

/// A message as delivered (`message` event) or listed by history.
public struct ChatMessage: Sendable, Equatable {
    public var messageId: String
    public var from: String
    public var to: [String]
    public var text: String
    public var headers: JSONObject
    /// ISO-8601 UTC with milliseconds, the server's time.
    public var sentAt: String

    public init(messageId: String, from: String, to: [String], text: String, headers: JSONObject = [:], sentAt: String) {
        self.messageId = messageId
        self.from = from
        self.to = to
        self.text = text
        self.headers = headers
        self.sentAt = sentAt
    }

    init?(_ object: JSONObject) {
        guard let id = object["messageId"]?.string, let from = object["from"]?.string, let text = object["text"]?.string,
              let to = object["to"]?.array?.compactMap(\.string) else { return nil }
        self.init(messageId: id, from: from, to: to, text: text, headers: object["headers"]?.object ?? [:],
                  sentAt: object["sentAt"]?.string ?? "")
    }
}

/// A `delivered` or `read` receipt for a message this user sent.
public struct Receipt: Sendable, Equatable {
    public enum Kind: String, Sendable { case delivered, read }
    public var kind: Kind
    public var messageId: String
    /// The recipient who received or read it.
    public var userId: String
    public var at: String

    public init(kind: Kind, messageId: String, userId: String, at: String) {
        self.kind = kind
        self.messageId = messageId
        self.userId = userId
        self.at = at
    }
}

/// A presence change of a subscribed user.
public struct Presence: Sendable, Equatable {
    public var userId: String
    public var online: Bool
    /// Now while online, the last disconnect while offline, nil if never seen.
    public var lastSeenAt: String?
}

/// Another user started or stopped typing to this one.
public struct TypingIndicator: Sendable, Equatable {
    public var from: String
    public var active: Bool
}

/// A message to send; the outbox keeps it until the server acknowledged it.
public struct OutgoingMessage: Sendable, Equatable {
    public var to: [String]
    public var text: String
    public var headers: JSONObject

    public init(to: [String], text: String, headers: JSONObject = [:]) {
        self.to = to
        self.text = text
        self.headers = headers
    }
}

/// A recipient the server did not deliver to, and why (`user_not_found`).
public struct FailedRecipient: Sendable, Equatable {
    public var userId: String
    public var reason: String
}

/// The server's acknowledgement of a send: the message is durably stored.
public struct SentMessage: Sendable, Equatable {
    public var clientMessageId: String
    public var messageId: String
    public var sentAt: String
    /// Recipients that do not exist.
    public var failed: [FailedRecipient]
    /// True when this was a re-send of a message the server already had (after a lost `ok`).
    public var duplicate: Bool
}

extension FailedRecipient {
    static func list(_ value: JSONValue?) -> [FailedRecipient] {
        (value?.array ?? []).compactMap { item in
            guard let user = item["userId"]?.string else { return nil }
            return FailedRecipient(userId: user, reason: item["reason"]?.string ?? "")
        }
    }
}
