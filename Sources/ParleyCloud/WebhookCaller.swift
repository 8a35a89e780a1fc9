import ParleyHTTP
import ParleyJSON

/// Calls webhooks: `POST url` with a JSON body and, when configured, `X-Parse-Webhook-Key`,
/// through the event loops' HTTP client (kept-alive connections, a deadline per call, answers
/// bounded by `CloudConfiguration.maxAnswerBytes`, a bounded queue per webhook host).
public struct WebhookCaller: Sendable {
    public let client: HTTPClient
    public let key: String?
    public let timeout: Duration

    public init(client: HTTPClient, key: String?, timeout: Duration) {
        self.client = client
        self.key = key
        self.timeout = timeout
    }

    /// The webhook's `success` value (JSON null when it sent none), or why there is none: its
    /// `{"error": …}` becomes `scriptFailed` with the error's message (a string, or an object's
    /// `message`), as Parse's `resolveError`.
    public func call(_ url: String, body: JSONObject, retryOnStaleConnection: Bool = true) async throws(CloudError) -> JSONValue {
        guard let target = HTTPClientURL(url) else { throw .unsupportedURL(url) }
        var bytes: [UInt8] = []
        JSONValue.object(body).serialize(into: &bytes)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        if let key { headers.add("X-Parse-Webhook-Key", key) }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(HTTPClientRequest(method: .post, url: target, headers: headers, body: bytes,
                                                                  retryOnStaleConnection: retryOnStaleConnection), timeout: timeout)
        } catch {
            throw .webhookFailed(WebhookFailure(error))
        }
        return try Self.interpret(status: response.status.code, body: response.body)
    }

    /// Reads a webhook's answer: `{"success": X}` → X; `{"error": E}` → 141 with E's message.
    static func interpret(status: Int, body: [UInt8]) throws(CloudError) -> JSONValue {
        guard case .object(let answer)? = try? JSONParser().parse(body) else {
            throw .webhookFailed((200..<300).contains(status) ? .malformed : .status(status))
        }
        if let error = answer["error"], !error.isNull {
            switch error {
            case .string(let message): throw .scriptFailed(message)
            case .object(let object): throw .scriptFailed(object["message"]?.string ?? object["error"]?.string ?? error.serialized())
            default: throw .scriptFailed(error.serialized())
            }
        }
        guard (200..<300).contains(status) else { throw .webhookFailed(.status(status)) }
        return answer["success"] ?? .null
    }
}
