import ParleyJSON
import ParleyLog
import ParleyWebSocket

/// Builds the server's frames as encoded WebSocket text frames (ready for `send(encodedFrame:)`).
public enum ServerFrame {
    /// `welcome`, the answer to `hello`.
    public static func welcome(userId: String, deviceId: String, lastSeq: Int64, gap: Bool, reset: Bool) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"type\":\"welcome\",\"userId\":")
        out.string(userId)
        out.raw(",\"deviceId\":")
        out.string(deviceId)
        out.raw(",\"lastSeq\":")
        out.int(lastSeq)
        out.raw(gap ? ",\"gap\":true" : ",\"gap\":false")
        if reset { out.raw(",\"reset\":true") }
        out.raw("}")
        return out.frame()
    }

    /// `ok` for request `re`, with extra fields.
    public static func ok(re: RequestID?, _ fields: [(String, JSONValue)] = []) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"type\":\"ok\",\"re\":")
        out.value(re?.json ?? .null)
        for (key, value) in fields {
            out.raw(",")
            out.string(key)
            out.raw(":")
            out.value(value)
        }
        out.raw("}")
        return out.frame()
    }

    /// `error` for request `re` (null when the frame had no readable id).
    public static func error(re: RequestID?, code: RealtimeErrorCode, message: String, _ fields: [(String, JSONValue)] = []) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"type\":\"error\",\"re\":")
        out.value(re?.json ?? .null)
        out.raw(",\"code\":")
        out.string(code.rawValue)
        out.raw(",\"error\":")
        out.string(message)
        for (key, value) in fields {
            out.raw(",")
            out.string(key)
            out.raw(":")
            out.value(value)
        }
        out.raw("}")
        return out.frame()
    }

    /// `presence` of one user.
    public static func presence(userId: String, online: Bool, lastSeenAt: Int64?) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"type\":\"presence\",\"userId\":")
        out.string(userId)
        out.raw(online ? ",\"online\":true,\"lastSeenAt\":" : ",\"online\":false,\"lastSeenAt\":")
        if let lastSeenAt { out.string(UTCTime.iso8601(milliseconds: lastSeenAt)) } else { out.raw("null") }
        out.raw("}")
        return out.frame()
    }

    /// `typing` relayed from `from`.
    public static func typing(from: String, active: Bool) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"type\":\"typing\",\"from\":")
        out.string(from)
        out.raw(active ? ",\"active\":true}" : ",\"active\":false}")
        return out.frame()
    }

    /// A frame that is not queued (no seq), e.g. `call.candidates` relayed to a connected party.
    public static func unqueued(_ object: JSONObject) -> [UInt8] {
        var out = JSONWriter()
        out.value(.object(object))
        return out.frame()
    }

    /// A queued event with its seq.
    public static func event(_ event: QueuedEvent) -> [UInt8] {
        switch event.body {
        case .message(let message):
            return MessageFrameTemplate(message).frame(seq: event.seq)
        case .receipt(let kind, let messageId, let userId, let at):
            var out = JSONWriter()
            out.raw("{\"type\":\"receipt\",\"seq\":")
            out.int(event.seq)
            out.raw(",\"kind\":")
            out.string(kind)
            out.raw(",\"messageId\":")
            out.string(messageId)
            out.raw(",\"userId\":")
            out.string(userId)
            out.raw(",\"at\":")
            out.string(UTCTime.iso8601(milliseconds: at))
            out.raw("}")
            return out.frame()
        case .custom(let object):
            var out = JSONWriter()
            out.raw("{\"type\":")
            out.value(object["type"] ?? .string("event"))
            out.raw(",\"seq\":")
            out.int(event.seq)
            for (key, value) in object where key != "type" && key != "seq" {
                out.raw(",")
                out.string(key)
                out.raw(":")
                out.value(value)
            }
            out.raw("}")
            return out.frame()
        }
    }
}

/// A `message` event encoded once, completed with each device's seq (fan-out without re-encoding).
public struct MessageFrameTemplate: Sendable {
    private let head: [UInt8]
    private let tail: [UInt8]

    public init(_ message: MessageRecord) {
        head = Array("{\"type\":\"message\",\"seq\":".utf8)
        var out = JSONWriter()
        out.raw(",\"messageId\":")
        out.string(message.id)
        out.raw(",\"from\":")
        out.string(message.from)
        out.raw(",\"to\":[")
        for (index, user) in message.to.enumerated() {
            if index > 0 { out.raw(",") }
            out.string(user)
        }
        out.raw("],\"text\":")
        out.string(message.text)
        out.raw(",\"headers\":")
        out.raw(message.headersJSON)
        out.raw(",\"sentAt\":")
        out.string(UTCTime.iso8601(milliseconds: message.sentAt))
        out.raw("}")
        tail = out.bytes
    }

    /// The encoded WebSocket frame for one device.
    public func frame(seq: Int64) -> [UInt8] {
        var out = JSONWriter(capacity: head.count + tail.count + 20)
        out.bytes.append(contentsOf: head)
        out.int(seq)
        out.bytes.append(contentsOf: tail)
        return out.frame()
    }
}

/// Appends compact JSON to a byte array.
struct JSONWriter {
    var bytes: [UInt8]

    init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }
    mutating func string(_ text: String) { JSONValue.string(text).serialize(into: &bytes) }
    mutating func value(_ value: JSONValue) { value.serialize(into: &bytes) }
    mutating func int(_ number: Int64) { bytes.append(contentsOf: String(number).utf8) }

    /// The bytes as an encoded WebSocket text frame.
    func frame() -> [UInt8] {
        WebSocketFrameEncoder.encode(opcode: .text, payload: bytes)
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }
}
