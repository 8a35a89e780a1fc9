import ParleyHTTP
import ParleyJSON
import ParleyRealtime

/// `GET /v1/calls` (the user's call history, newest first, paged with `before=<callId>` and
/// `limit`) and `GET /v1/turn` (TURN credentials, `{}` when TURN is not configured).
/// Authenticated like every `/v1` endpoint (`RealtimeAuthenticator.authenticate(_:)`).
public struct CallEndpoints: Sendable {
    static let defaultLimit = 50

    let calls: CallService
    let authenticator: any RealtimeAuthenticator

    public init(calls: CallService, authenticator: any RealtimeAuthenticator) {
        self.calls = calls
        self.authenticator = authenticator
    }

    public func register(on router: Router) {
        router.get("/v1/calls") { [calls, authenticator] request, _ in
            let userId = try await Self.authenticate(request, authenticator)
            var limit = Self.defaultLimit
            if let text = request.queryParameter("limit") {
                guard let value = Int(text), value >= 1, value <= CallStore.maxPageSize else {
                    throw CallEndpointError(400, "bad_request", "\"limit\" must be 1-\(CallStore.maxPageSize)")
                }
                limit = value
            }
            let before = request.queryParameter("before").flatMap { $0.isEmpty ? nil : $0 }
            do throws(CallError) {
                return Self.json(.ok, try await calls.history(userId: userId, before: before, limit: limit))
            } catch {
                throw CallEndpointError(error == .unavailable ? 503 : 400, error.code, error.description)
            }
        }
        router.get("/v1/turn") { [calls, authenticator] request, _ in
            let userId = try await Self.authenticate(request, authenticator)
            var response = Self.json(.ok, calls.turnCredentials(for: userId))
            response.headers.add("Cache-Control", "no-store")
            return response
        }
    }

    /// The user of the request's session token (the `/v1` rule: `RealtimeAuthenticator.authenticate(_:)`).
    static func authenticate(_ request: HTTPRequest, _ authenticator: any RealtimeAuthenticator) async throws(RealtimeRESTError) -> String {
        do throws(RealtimeFailure) {
            return try await authenticator.authenticate(request).userId
        } catch {
            throw RealtimeRESTError(error)
        }
    }

    static func json(_ status: HTTPStatus, _ value: JSONValue) -> HTTPResponse {
        RealtimeRESTError.json(status, value)
    }
}

/// A refused call request over REST: `{"code":"…","error":"…"}` with its status.
struct CallEndpointError: HTTPResponseError {
    let status: HTTPStatus
    let code: String
    let message: String

    init(_ status: HTTPStatus, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    func response() -> HTTPResponse {
        CallEndpoints.json(status, ["code": .string(code), "error": .string(message)])
    }
}
