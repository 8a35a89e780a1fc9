import ParleyHTTP
import ParleyJSON

/// A realtime failure as a `/v1` REST response: `{"code":"…","error":"…"}` with its status (401
/// for an invalid session, 404 unknown user, 403 rejected by a hook, 429 rate limited, 503
/// unavailable or hook failed, 500 internal, 400 otherwise). Shared by every `/v1` endpoint.
public struct RealtimeRESTError: HTTPResponseError {
    public let failure: RealtimeFailure

    public init(_ failure: RealtimeFailure) {
        self.failure = failure
    }

    public func response() -> HTTPResponse {
        let status: HTTPStatus = switch failure.code {
        case .invalidSession: 401
        case .userNotFound: 404
        case .rateLimited: 429
        case .rejected: 403
        case .unavailable, .hookFailed: 503
        case .internal: 500
        default: 400
        }
        var body: JSONObject = ["code": .string(failure.code.rawValue), "error": .string(failure.message)]
        if !failure.failedRecipients.isEmpty {
            body["failed"] = .array(failure.failedRecipients.map { .object(["userId": .string($0), "reason": "user_not_found"]) })
        }
        return Self.json(status, .object(body))
    }

    /// A JSON response as every `/v1` endpoint writes it.
    public static func json(_ status: HTTPStatus, _ value: JSONValue) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: value.serialized())
    }
}
