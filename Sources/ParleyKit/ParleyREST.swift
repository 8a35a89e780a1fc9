import ParleyJSON

/// The REST side of `/v1`: history paging, call history and TURN credentials.
public struct ParleyREST: Sendable {
    public let server: ParleyServerURL
    public let http: any ParleyHTTPTransport
    public let sessionToken: String

    public init(server: ParleyServerURL, http: any ParleyHTTPTransport, sessionToken: String) {
        self.server = server
        self.http = http
        self.sessionToken = sessionToken
    }

    /// A page of the conversation with `user`, newest first; pass the last `messageId` of a
    /// page as `before` for the next one.
    public func history(with user: String, before: String? = nil, limit: Int = 50) async throws(ParleyError) -> [ChatMessage] {
        var target = "/v1/messages?with=" + Self.percentEncoded(user) + "&limit=\(max(1, min(200, limit)))"
        if let before { target += "&before=" + Self.percentEncoded(before) }
        let body = try await get(target)
        return (body["results"]?.array ?? []).compactMap { $0.object.flatMap(ChatMessage.init) }
    }

    /// Sends a message over REST (no socket needed); idempotent by `clientMessageId`.
    public func send(_ message: OutgoingMessage, clientMessageId: String) async throws(ParleyError) -> SentMessage {
        let object: JSONObject = ["clientMessageId": .string(clientMessageId), "to": .array(message.to.map { .string($0) }),
                                  "text": .string(message.text), "headers": .object(message.headers)]
        var bytes: [UInt8] = []
        JSONValue.object(object).serialize(into: &bytes)
        let body = try await call(ParleyHTTPRequest(method: "POST", target: "/v1/messages", body: bytes))
        return SentMessage(clientMessageId: clientMessageId, messageId: body["messageId"]?.string ?? "",
                           sentAt: body["sentAt"]?.string ?? "", failed: FailedRecipient.list(body["failed"]),
                           duplicate: body["duplicate"]?.bool ?? false)
    }

    /// A page of the user's calls, newest first; `before` is the last `callId` of a page.
    public func callHistory(before: String? = nil, limit: Int = 50) async throws(ParleyError) -> [CallDetails] {
        var target = "/v1/calls?limit=\(max(1, min(200, limit)))"
        if let before { target += "&before=" + Self.percentEncoded(before) }
        let body = try await get(target)
        return (body["results"]?.array ?? []).compactMap { $0.object.flatMap(CallDetails.init) }
    }

    /// Short-lived TURN credentials for WebRTC (nil when the server has no TURN configured).
    public func turnCredentials() async throws(ParleyError) -> TURNCredentials? {
        let body = try await get("/v1/turn")
        guard let uris = body["uris"]?.array?.compactMap(\.string), let username = body["username"]?.string,
              let password = body["password"]?.string else { return nil }
        return TURNCredentials(uris: uris, username: username, password: password, ttlSeconds: body["ttl"]?.int ?? 0)
    }

    private func get(_ target: String) async throws(ParleyError) -> JSONObject {
        try await call(ParleyHTTPRequest(method: "GET", target: target))
    }

    private func call(_ request: ParleyHTTPRequest) async throws(ParleyError) -> JSONObject {
        var request = request
        request.headers.append(("Authorization", "Bearer " + sessionToken))
        if !request.body.isEmpty { request.headers.append(("Content-Type", "application/json")) }
        let response = try await http.send(request, to: server)
        let parsed = try? JSONParser().parse(response.body)
        guard (200..<300).contains(response.status) else {
            let code = parsed?["code"]?.string ?? "http_\(response.status)"
            if code == "invalid_session" { throw .invalidSession }
            throw .server(code: code, message: parsed?["error"]?.string ?? "")
        }
        guard let object = parsed?.object else { throw .badResponse("\(request.target): not a JSON object") }
        return object
    }

    /// Percent-encodes everything outside RFC 3986's unreserved characters (for query values).
    public static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// TURN credentials in coturn's shared-secret format, for the app's WebRTC ICE servers.
public struct TURNCredentials: Sendable, Equatable {
    public var uris: [String]
    public var username: String
    public var password: String
    public var ttlSeconds: Int64
}
