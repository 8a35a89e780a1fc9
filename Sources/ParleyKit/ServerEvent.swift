import ParleyJSON

/// A frame from the server, parsed (sans-I/O: text in, value out).
public enum ServerEvent: Sendable, Equatable {
    /// The answer to `hello`.
    case welcome(userId: String, deviceId: String, lastSeq: Int64, gap: Bool, reset: Bool)
    /// A request succeeded; `fields` holds the whole frame.
    case ok(re: Int64?, fields: JSONObject)
    /// A request failed (`re` nil when the server could not read the id).
    case error(re: Int64?, code: String, message: String, fields: JSONObject)
    /// A queued event (`message`, `receipt`, `call.incoming`, …) with its seq.
    case queued(seq: Int64, IncomingEvent)
    /// An event that is not queued (presence, typing, live call events): no seq, no ack.
    case live(IncomingEvent)

    /// Parses one text frame; nil when it is not a JSON object with a string `type`.
    public static func parse(_ text: String) -> ServerEvent? {
        guard case .object(let object)? = try? JSONParser(maxDepth: 32).parse(text),
              let type = object["type"]?.string else { return nil }
        return parse(object, type: type)
    }

    static func parse(_ object: JSONObject, type: String) -> ServerEvent? {
        switch type {
        case "welcome":
            guard let user = object["userId"]?.string, let device = object["deviceId"]?.string,
                  let lastSeq = object["lastSeq"]?.int else { return nil }
            return .welcome(userId: user, deviceId: device, lastSeq: lastSeq, gap: object["gap"]?.bool ?? false,
                            reset: object["reset"]?.bool ?? false)
        case "ok":
            return .ok(re: object["re"]?.int, fields: object)
        case "error":
            return .error(re: object["re"]?.int, code: object["code"]?.string ?? "unknown",
                          message: object["error"]?.string ?? "", fields: object)
        default:
            guard let event = IncomingEvent(type: type, object: object) else { return nil }
            if let seq = object["seq"]?.int { return .queued(seq: seq, event) }
            return .live(event)
        }
    }
}

/// An event for the app (or, for `call.*`, the SDK's call layer).
public enum IncomingEvent: Sendable, Equatable {
    case message(ChatMessage)
    case receipt(Receipt)
    case presence(Presence)
    case typing(TypingIndicator)
    /// A `call.*` event: the frame's type and fields.
    case call(type: String, fields: JSONObject)
    /// An event type this SDK version does not know.
    case other(type: String, fields: JSONObject)

    init?(type: String, object: JSONObject) {
        switch type {
        case "message":
            guard let message = ChatMessage(object) else { return nil }
            self = .message(message)
        case "receipt":
            guard let kind = object["kind"]?.string.flatMap(Receipt.Kind.init(rawValue:)),
                  let id = object["messageId"]?.string, let user = object["userId"]?.string else { return nil }
            self = .receipt(Receipt(kind: kind, messageId: id, userId: user, at: object["at"]?.string ?? ""))
        case "presence":
            guard let user = object["userId"]?.string, let online = object["online"]?.bool else { return nil }
            self = .presence(Presence(userId: user, online: online, lastSeenAt: object["lastSeenAt"]?.string))
        case "typing":
            guard let from = object["from"]?.string else { return nil }
            self = .typing(TypingIndicator(from: from, active: object["active"]?.bool ?? true))
        default:
            if type.hasPrefix("call.") {
                guard object["callId"]?.string != nil else { return nil }
                self = .call(type: type, fields: object)
            } else {
                self = .other(type: type, fields: object)
            }
        }
    }

    /// The key duplicates share: a message by `messageId`, a receipt by message, user and
    /// kind, a call event by type and call id (docs/realtime-protocol.md, delivery guarantees).
    var dedupeKey: String? {
        switch self {
        case .message(let message): "m:" + message.messageId
        case .receipt(let receipt): "r:\(receipt.kind.rawValue):\(receipt.messageId):\(receipt.userId)"
        case .call(let type, let fields): "c:\(type):\(fields["callId"]?.string?.lowercased() ?? "")"
        case .presence, .typing, .other: nil
        }
    }
}
