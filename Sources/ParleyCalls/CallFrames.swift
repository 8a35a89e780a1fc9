import ParleyJSON
import ParleyLog

/// The `call.*` events the server sends, as JSON objects (the realtime layer frames them).
public enum CallFrames {
    /// `call.incoming` for callee devices.
    public static func incoming(callId: String, from: String, video: Bool, sdp: String, headers: JSONObject, expiresAt: Int64) -> JSONObject {
        JSONObject([
            ("type", "call.incoming"), ("callId", .string(callId)), ("from", .string(from)), ("video", .bool(video)),
            ("sdp", .string(sdp)), ("headers", .object(headers)), ("expiresAt", .string(UTCTime.iso8601(milliseconds: expiresAt))),
        ])
    }

    /// The frame for `message` about the call `record`; devices appear as their labels.
    public static func event(_ message: CallMessage, record: CallRecord, deviceLabel: (CallDevice) -> String) -> JSONObject {
        var object = JSONObject(minimumCapacity: 5)
        object["type"] = .string(message.type)
        object["callId"] = .string(record.callId)
        switch message {
        case .progress, .ringing, .established:
            break
        case .answered(let sdp, let deviceId):
            object["sdp"] = .string(sdp)
            object["deviceId"] = .string(deviceLabel(CallDevice(userId: record.calleeId, deviceId: deviceId)))
        case .candidates(let candidates):
            object["candidates"] = .array(candidates)
        case .negotiate(let payload):
            for (key, value) in payload { object[key] = value }
        case .ended(let cause, let error):
            object["endCause"] = .string(cause.rawValue)
            object["error"] = error.map { .string($0) } ?? .null
            object["details"] = record.json(deviceLabel: deviceLabel)
        }
        return object
    }
}
