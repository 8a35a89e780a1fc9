import ParleyJSON

/// Where a call stands; it only moves forward (docs/realtime-protocol.md, "Calls").
public enum CallState: String, Sendable, Comparable {
    /// Outgoing: the invite is on its way. Incoming: known from a VoIP push, offer not yet here.
    case initiating
    /// Outgoing: a callee device was offered the call. Incoming: the offer arrived.
    case progressing
    /// A callee device rings.
    case ringing
    /// A callee device answered.
    case answered
    /// Media is up (a party reported `call.established`).
    case established
    /// Over; see `endCause`.
    case ended

    var rank: Int {
        switch self {
        case .initiating: 0
        case .progressing: 1
        case .ringing: 2
        case .answered: 3
        case .established: 4
        case .ended: 5
        }
    }

    public static func < (lhs: CallState, rhs: CallState) -> Bool { lhs.rank < rhs.rank }
}

/// Why a call ended (the server's `endCause`).
public enum CallEndCause: String, Sendable {
    case canceled, denied, busy, noAnswer, timeout, hungUp, otherDeviceAnswered, inactive, failure
}

/// The call's record: the `details` of `call.ended` and of `GET /v1/calls`.
public struct CallDetails: Sendable, Equatable {
    public var callId: String
    public var from: String
    public var to: String
    public var video: Bool
    public var headers: JSONObject
    public var state: String
    public var answeredDeviceId: String?
    public var startedAt: String?
    public var progressedAt: String?
    public var rungAt: String?
    public var answeredAt: String?
    public var establishedAt: String?
    public var endedAt: String?
    public var endCause: CallEndCause?
    public var error: String?
    /// Milliseconds (nil when a bound is missing).
    public var duration: Int64?
    public var setupDuration: Int64?
    public var notifyingDuration: Int64?
    public var ringingDuration: Int64?
    /// The whole object as the server sent it.
    public var raw: JSONObject

    public init?(_ object: JSONObject) {
        guard let callId = object["callId"]?.string, let from = object["from"]?.string, let to = object["to"]?.string else { return nil }
        self.callId = callId
        self.from = from
        self.to = to
        video = object["video"]?.bool ?? false
        headers = object["headers"]?.object ?? [:]
        state = object["state"]?.string ?? ""
        answeredDeviceId = object["answeredDeviceId"]?.string
        startedAt = object["startedAt"]?.string
        progressedAt = object["progressedAt"]?.string
        rungAt = object["rungAt"]?.string
        answeredAt = object["answeredAt"]?.string
        establishedAt = object["establishedAt"]?.string
        endedAt = object["endedAt"]?.string
        endCause = object["endCause"]?.string.flatMap(CallEndCause.init(rawValue:))
        error = object["error"]?.string
        duration = object["duration"]?.int
        setupDuration = object["setupDuration"]?.int
        notifyingDuration = object["notifyingDuration"]?.int
        ringingDuration = object["ringingDuration"]?.int
        raw = object
    }
}

/// An SDP's role in a (re)negotiation.
public enum SDPKind: String, Sendable {
    case offer, answer
}

/// An incoming call as a VoIP push (iOS) or high-priority data message (Android) carries it
/// (docs/push.md, "What the apps receive"): enough to report it to the system UI before the
/// socket is connected.
public struct VoIPPushPayload: Sendable, Equatable {
    public var callId: String
    public var from: String
    public var callerName: String?
    public var video: Bool
    public var headers: JSONObject
    /// The push left the headers out (over 1 KiB); `call.incoming` brings them.
    public var headersOmitted: Bool
    /// ISO-8601; after it the call can no longer be answered.
    public var expiresAt: String?

    /// Decodes the APNs payload (top-level keys beside `aps`) or an FCM data map (every value a
    /// string: `"video":"true"`, `"headers":"{…}"`). Nil when it is not a Parley call push.
    public init?(_ payload: JSONValue) {
        guard payload["type"]?.string == "call", let callId = payload["callId"]?.string, ParleyUUID(callId) != nil,
              let from = payload["from"]?.string else { return nil }
        self.callId = callId
        self.from = from
        callerName = payload["callerName"]?.string
        video = payload["video"]?.bool ?? (payload["video"]?.string == "true")
        if let object = payload["headers"]?.object {
            headers = object
        } else if let text = payload["headers"]?.string, case .object(let object)? = try? JSONParser(maxDepth: 16).parse(text) {
            headers = object
        } else {
            headers = [:]
        }
        headersOmitted = payload["headersOmitted"]?.bool ?? (payload["headersOmitted"]?.string == "true")
        expiresAt = payload["expiresAt"]?.string
    }

    /// Decodes the payload's JSON text (e.g. `PKPushPayload.dictionaryPayload` serialized).
    public init?(jsonText: String) {
        guard let value = try? JSONParser(maxDepth: 16, maxBytes: 64 * 1024).parse(jsonText) else { return nil }
        self.init(value)
    }

    /// The UUID CallKit and LiveCommunicationKit know the call by (the call id itself).
    public var uuid: ParleyUUID { ParleyUUID(callId)! }

    /// Whether the call can no longer be answered at `nowMilliseconds` (wall clock).
    public func isExpired(nowMilliseconds: Int64 = WallClock.nowMilliseconds()) -> Bool {
        guard let expiresAt, let deadline = WallClock.parse(expiresAt) else { return false }
        return nowMilliseconds >= deadline
    }
}
