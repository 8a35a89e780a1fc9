import ParleyHTTP

/// Who a valid session token belongs to, and until when it is valid.
public struct RealtimeIdentity: Sendable, Equatable {
    public let userId: String
    /// When the session expires, milliseconds since the Unix epoch (a socket is closed then).
    public let sessionExpiresAt: Int64

    public init(userId: String, sessionExpiresAt: Int64) {
        self.userId = userId
        self.sessionExpiresAt = sessionExpiresAt
    }
}

/// Resolves session tokens for the realtime service and the `/v1` endpoints. The accounts module
/// owns sessions and users; the server wires in an implementation backed by it (realtime never
/// reads those tables), so a socket `hello` and a `/v1` request follow the same session-validity
/// rule as the Parse API.
public protocol RealtimeAuthenticator: Sendable {
    /// The identity of a valid session (nil when unknown, expired, revoked, or the user is banned).
    func authenticate(sessionToken: String) async throws -> RealtimeIdentity?
    /// Whether the user exists.
    func userExists(_ userId: String) async throws -> Bool
}

extension RealtimeAuthenticator {
    /// The identity of a `/v1` REST request's session token: `.invalidSession` when it has none
    /// or an invalid one, `.unavailable` when the session store cannot answer.
    public func authenticate(_ request: HTTPRequest) async throws(RealtimeFailure) -> RealtimeIdentity {
        guard let token = Self.sessionToken(of: request) else { throw RealtimeFailure(.invalidSession, "a session token is required") }
        let identity: RealtimeIdentity?
        do {
            identity = try await authenticate(sessionToken: token)
        } catch {
            throw RealtimeFailure(.unavailable, "the database is unavailable; retry later")
        }
        guard let identity else { throw RealtimeFailure(.invalidSession, "invalid session token") }
        return identity
    }

    /// The session token of a `/v1` request: `X-Parse-Session-Token`, else
    /// `Authorization: Bearer <token>`; nil when neither is given (or empty).
    public static func sessionToken(of request: HTTPRequest) -> String? {
        var token = request.headers["X-Parse-Session-Token"]
        if token == nil, let authorization = request.headers["Authorization"] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { token = String(parts[1]) }
        }
        guard let token, !token.isEmpty else { return nil }
        return token
    }
}
