import ParleyJSON
import ParleyLog

/// Builds the gorush notification (`POST /api/push`, one element of `notifications`) for a job.
///
/// Every notification has one token and `notif_id` = the job id, so the gateway's failure log
/// names the job even when gorush hides tokens in its logs.
public enum GorushNotification {
    /// The text of a message push when previews are off.
    public static let hiddenPreview = "New message"

    public static func build(_ job: PushJob, configuration: PushConfiguration) -> JSONObject {
        switch job.kind {
        case .message: message(job, configuration)
        case .call: call(job, configuration)
        case .parse: parse(job, configuration)
        }
    }

    /// Parse's push `data`: `alert` (a string, or an object with `title`/`body`), `title`,
    /// `badge`, `sound`, `content-available`, `mutable-content`, `category`, `uri`; every other
    /// key goes to the app in `data`.
    private static func parse(_ job: PushJob, _ configuration: PushConfiguration) -> JSONObject {
        let payload = job.callPayload ?? JSONObject()
        var notification = JSONObject(minimumCapacity: 14)
        notification["notif_id"] = .string(String(job.id))
        notification["tokens"] = .array([.string(job.token)])
        notification["platform"] = .int(Int64(job.platform.rawValue))
        var custom: [(String, JSONValue)] = []
        for (key, value) in payload {
            switch key {
            case "alert":
                if let text = value.string {
                    notification["message"] = .string(text)
                } else if let alert = value.object {
                    if let body = alert["body"]?.string { notification["message"] = .string(body) }
                    if let title = alert["title"]?.string, payload["title"] == nil { notification["title"] = .string(title) }
                    if job.platform == .ios { notification["alert"] = value }
                }
            case "title": if let text = value.string { notification["title"] = .string(text) }
            case "badge": if let number = value.int { notification["badge"] = .int(number) }
            case "sound": if let text = value.string { notification["sound"] = .string(text) }
            case "content-available": notification["content_available"] = .bool(value.int == 1 || value.bool == true)
            case "mutable-content": notification["mutable_content"] = .bool(value.int == 1 || value.bool == true)
            case "category": if let text = value.string { notification["category"] = .string(text) }
            default: custom.append((key, value))
            }
        }
        if let expiresAt = job.expiresAt { notification["expiration"] = .int(max(0, expiresAt / 1000)) }
        notification["priority"] = "high"
        switch job.platform {
        case .ios:
            if !configuration.bundleID.isEmpty { notification["topic"] = .string(configuration.bundleID) }
            notification["push_type"] = notification["message"] == nil && notification["content_available"] == true ? "background" : "alert"
            if !custom.isEmpty { notification["data"] = .object(JSONObject(custom)) }
        case .android:
            if !custom.isEmpty { notification["data"] = .object(stringValues(custom)) }
        }
        return notification
    }

    private static func message(_ job: PushJob, _ configuration: PushConfiguration) -> JSONObject {
        var text = hiddenPreview
        if configuration.messagePreview, let body = job.messageText, !body.isEmpty {
            text = body.count > configuration.previewLength ? String(body.prefix(configuration.previewLength)) + "…" : body
        }
        var data: [(String, JSONValue)] = [
            ("type", "message"), ("conversation", .string(job.collapseKey)), ("count", .int(Int64(job.messageCount))),
        ]
        if let messageId = job.messageId { data.append(("messageId", .string(messageId))) }
        if let sender = job.sender { data.append(("from", .string(sender))) }
        var notification = JSONObject(minimumCapacity: 14)
        notification["notif_id"] = .string(String(job.id))
        notification["tokens"] = .array([.string(job.token)])
        notification["platform"] = .int(Int64(job.platform.rawValue))
        notification["title"] = .string(job.senderName ?? job.sender ?? "")
        notification["message"] = .string(text)
        notification["priority"] = "high"
        switch job.platform {
        case .ios:
            if !configuration.bundleID.isEmpty { notification["topic"] = .string(configuration.bundleID) }
            notification["push_type"] = "alert"
            notification["collapse_id"] = .string(job.collapseKey)
            notification["thread-id"] = .string(job.collapseKey)
            notification["sound"] = "default"
            notification["data"] = .object(JSONObject(data))
        case .android:
            notification["collapse_key"] = .string(job.collapseKey)
            notification["android"] = .object(["collapse_key": .string(job.collapseKey)])
            notification["data"] = .object(stringValues(data))
        }
        return notification
    }

    private static func call(_ job: PushJob, _ configuration: PushConfiguration) -> JSONObject {
        let payload = job.callPayload ?? JSONObject()
        var data: [(String, JSONValue)] = [
            ("type", "call"), ("callId", .string(job.callId ?? payload["callId"]?.string ?? "")),
            ("from", .string(payload["from"]?.string ?? job.sender ?? "")),
            ("video", .bool(payload["video"]?.bool ?? false)),
        ]
        if let name = job.senderName { data.append(("callerName", .string(name))) }
        let headers = payload["headers"]?.object ?? JSONObject()
        if JSONValue.object(headers).serialized().utf8.count <= configuration.maxCallHeaderBytes {
            data.append(("headers", .object(headers)))
        } else {
            data.append(("headers", .object(JSONObject())))
            data.append(("headersOmitted", true))
        }
        if let expiresAt = job.expiresAt { data.append(("expiresAt", .string(UTCTime.iso8601(milliseconds: expiresAt)))) }
        var notification = JSONObject(minimumCapacity: 10)
        notification["notif_id"] = .string(String(job.id))
        notification["tokens"] = .array([.string(job.token)])
        notification["platform"] = .int(Int64(job.platform.rawValue))
        notification["priority"] = "high"
        switch job.platform {
        case .ios:
            if !configuration.bundleID.isEmpty { notification["topic"] = .string(configuration.bundleID + ".voip") }
            notification["push_type"] = "voip"
            if let expiresAt = job.expiresAt { notification["expiration"] = .int(max(0, expiresAt / 1000)) }
            notification["data"] = .object(JSONObject(data))
        case .android:
            notification["android"] = .object(["priority": "high"])
            notification["data"] = .object(stringValues(data))
        }
        return notification
    }

    /// FCM data values are strings: objects and numbers become their JSON text.
    private static func stringValues(_ pairs: [(String, JSONValue)]) -> JSONObject {
        JSONObject(pairs.map { key, value in
            if case .string = value { return (key, value) }
            return (key, .string(value.serialized()))
        })
    }
}
