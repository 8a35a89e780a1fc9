import ParleyAccounts
import ParleyHTTP

/// The one authorization step of the Parse API: from a request's credentials to its viewer
/// (`Auth`). Every top-level request passes here once, before its endpoint runs; a batch's
/// sub-requests act as their batch; the inline answers make the same step from memory.
///
/// The rules, in order: the application id must match (403 otherwise); a matching master key
/// makes the viewer master; otherwise a configured REST key must match (403). Then the session
/// token, unless the endpoint ignores it (login), is resolved by the accounts module's one
/// session-validity rule (`SessionStore.lookup`): an invalid one is 209, except with the master
/// key, which ignores it. The installation id is the header's, else the session's.
///
/// Features that depend on who the viewer is (a user's roles, cached per session; login
/// throttling and rate limits per viewer or address) belong in this step, so that every request
/// and every sub-request gets them; see docs/architecture.md, "Requests".
struct ParseAuthorizer: Sendable {
    let configuration: ParseConfiguration
    let sessions: SessionStore

    /// What the keys grant.
    enum Access {
        case client, master
    }

    /// The key rule.
    @inline(__always)
    func access(_ credentials: ParseCredentials) throws(ParseFailure) -> Access {
        guard credentials.matches(.applicationID, configuration.applicationID) else { throw .unauthorized }
        if let masterKey = configuration.masterKey, credentials.matches(.masterKey, masterKey) { return .master }
        if let restKey = configuration.restAPIKey, !credentials.matches(.restAPIKey, restKey) { throw .unauthorized }
        return .client
    }

    /// The viewer of a request; `readsSession` is false for endpoints that ignore the session
    /// token (login).
    func authorize(_ credentials: ParseCredentials, readsSession: Bool, on db: any SQLExecutor) async throws(ParseFailure) -> Auth {
        let access = try access(credentials)
        var session: SessionInfo?
        if readsSession, let token = credentials.string(.sessionToken) {
            do {
                session = try await sessions.lookup(token, on: db)
            } catch {
                if access != .master { throw .parse(error) }
            }
        }
        return viewer(access, session, credentials)
    }

    /// `authorize` from memory alone, for a bodiless request answered on the event loop: nil
    /// whenever the full step could answer otherwise (a refused key, a session not cached).
    @inline(__always)
    func authorizeFromMemory(_ headers: HTTPHeaders, readsSession: Bool) -> Auth? {
        let credentials = ParseCredentials(headers: headers, envelope: nil)
        guard let access = try? access(credentials) else { return nil }
        var session: SessionInfo?
        if readsSession {
            // An empty token is no token, as `credentials.string` reads it on the full path.
            let cached = credentials.withValue(.sessionToken) { token -> CachedSession in
                token.isEmpty ? .none : sessions.cachedSession(token: token).map(CachedSession.valid) ?? .unknown
            } ?? .none
            switch cached {
            case .none: break
            case .valid(let info): session = info
            case .unknown: return nil
            }
        }
        return viewer(access, session, credentials)
    }

    private enum CachedSession {
        case none, valid(SessionInfo), unknown
    }

    @inline(__always)
    private func viewer(_ access: Access, _ session: SessionInfo?, _ credentials: ParseCredentials) -> Auth {
        Auth(isMaster: access == .master, user: session, installationId: credentials.string(.installationID) ?? session?.installationId)
    }
}
