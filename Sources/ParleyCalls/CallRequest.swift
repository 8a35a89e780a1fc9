import ParleyJSON

/// `call.invite` as validated.
public struct CallInvite: Sendable, Equatable {
    public var callId: String
    public var to: String
    public var video: Bool
    public var sdp: String
    public var headers: JSONObject
}

/// A parsed `call.*` frame from a device (sans-I/O: object in, request or `CallError` out).
public enum CallRequest: Sendable, Equatable {
    case invite(CallInvite)
    case ringing(callId: String)
    case answer(callId: String, sdp: String)
    case established(callId: String)
    case candidates(callId: String, candidates: [JSONValue])
    case negotiate(callId: String, sdp: String, kind: String)
    /// `busy` when a callee device declines with `"reason":"busy"`.
    case hangup(callId: String, busy: Bool)

    /// Longest user id accepted in `to`.
    static let maxUserIDBytes = 64

    /// The frame types this parser knows.
    public static let types: Set<String> = [
        "call.invite", "call.ringing", "call.answer", "call.established", "call.candidates", "call.negotiate", "call.hangup",
    ]

    /// The call the request is about.
    public var callId: String {
        switch self {
        case .invite(let invite): invite.callId
        case .ringing(let callId), .answer(let callId, _), .established(let callId), .candidates(let callId, _),
             .negotiate(let callId, _, _), .hangup(let callId, _):
            callId
        }
    }

    /// Parses a frame of one of `types`.
    public static func parse(type: String, _ object: JSONObject, limits: CallLimits) throws(CallError) -> CallRequest {
        let callId = try callID(object)
        switch type {
        case "call.invite":
            guard case .string(let to)? = object["to"], !to.isEmpty, to.utf8.count <= maxUserIDBytes, !to.utf8.contains(0) else {
                throw .invalidRequest("\"to\" must be a user id (a string of 1-\(maxUserIDBytes) bytes)")
            }
            let video: Bool
            switch object["video"] {
            case nil, .null?: video = false
            case .bool(let flag)?: video = flag
            default: throw .invalidRequest("\"video\" must be a boolean")
            }
            let sdp = try sdpField(object, limits: limits)
            var headers = JSONObject()
            switch object["headers"] {
            case nil, .null?:
                break
            case .object(let given)?:
                guard JSONValue.object(given).serialized().utf8.count <= limits.maxHeaderBytes else {
                    throw .invalidRequest("\"headers\" is larger than \(limits.maxHeaderBytes) bytes")
                }
                headers = given
            default:
                throw .invalidRequest("\"headers\" must be an object")
            }
            return .invite(CallInvite(callId: callId, to: to, video: video, sdp: sdp, headers: headers))
        case "call.ringing":
            return .ringing(callId: callId)
        case "call.answer":
            return .answer(callId: callId, sdp: try sdpField(object, limits: limits))
        case "call.established":
            return .established(callId: callId)
        case "call.candidates":
            guard case .array(let candidates)? = object["candidates"], !candidates.isEmpty else {
                throw .invalidRequest("\"candidates\" must be a non-empty array")
            }
            guard candidates.count <= limits.maxCandidatesPerFrame else {
                throw .invalidRequest("\"candidates\" has more than \(limits.maxCandidatesPerFrame) entries")
            }
            for candidate in candidates {
                switch candidate {
                case .object, .string: break
                default: throw .invalidRequest("each candidate must be an object or a string")
                }
                guard candidate.serialized().utf8.count <= limits.maxCandidateBytes else {
                    throw .invalidRequest("a candidate is larger than \(limits.maxCandidateBytes) bytes")
                }
            }
            return .candidates(callId: callId, candidates: candidates)
        case "call.negotiate":
            guard case .string(let kind)? = object["kind"], kind == "offer" || kind == "answer" else {
                throw .invalidRequest("\"kind\" must be \"offer\" or \"answer\"")
            }
            return .negotiate(callId: callId, sdp: try sdpField(object, limits: limits), kind: kind)
        case "call.hangup":
            switch object["reason"] {
            case nil, .null?, .string("denied")?: return .hangup(callId: callId, busy: false)
            case .string("busy")?: return .hangup(callId: callId, busy: true)
            default: throw .invalidRequest("\"reason\" must be \"busy\" or \"denied\" when given")
            }
        default:
            throw .invalidRequest("unknown call frame type \"\(type)\"")
        }
    }

    static func callID(_ object: JSONObject) throws(CallError) -> String {
        guard case .string(let callId)? = object["callId"], isUUID(callId) else {
            throw .invalidRequest("\"callId\" must be a UUID")
        }
        return callId
    }

    static func sdpField(_ object: JSONObject, limits: CallLimits) throws(CallError) -> String {
        guard case .string(let sdp)? = object["sdp"], !sdp.isEmpty else { throw .invalidRequest("\"sdp\" must be a non-empty string") }
        guard sdp.utf8.count <= limits.maxSDPBytes else { throw .invalidRequest("\"sdp\" is longer than \(limits.maxSDPBytes) bytes") }
        guard !sdp.utf8.contains(0) else { throw .invalidRequest("\"sdp\" must not contain NUL") }
        return sdp
    }

    /// 8-4-4-4-12 hexadecimal digits, any case.
    public static func isUUID(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let hex = (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
                guard hex else { return false }
            }
        }
        return true
    }
}
