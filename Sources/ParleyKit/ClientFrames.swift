import ParleyJSON

/// Builds the frames the client sends (docs/realtime-protocol.md, "Client → server").
enum ClientFrames {
    static func hello(sessionToken: String, deviceId: String, resumeAfter: Int64) -> String {
        JSONValue.object(["type": "hello", "sessionToken": .string(sessionToken), "deviceId": .string(deviceId),
                          "resumeAfter": .int(resumeAfter)]).serialized()
    }

    static func send(id: Int64, _ entry: OutboxEntry) -> String {
        var object: JSONObject = ["type": "message.send", "id": .int(id), "clientMessageId": .string(entry.clientMessageId),
                                  "to": .array(entry.message.to.map { .string($0) }), "text": .string(entry.message.text)]
        if !entry.message.headers.isEmpty { object["headers"] = .object(entry.message.headers) }
        return JSONValue.object(object).serialized()
    }

    static func ack(upTo seq: Int64) -> String {
        "{\"type\":\"ack\",\"upTo\":\(seq)}"
    }

    /// A request with `type`, the id and the given fields.
    static func request(id: Int64, type: String, fields: JSONObject) -> String {
        var object: JSONObject = ["type": .string(type), "id": .int(id)]
        for (key, value) in fields where key != "type" && key != "id" { object[key] = value }
        return JSONValue.object(object).serialized()
    }
}
