import ParleyAccounts
import ParleyHTTP

/// The one authorization step of the Parse API: from a request's credentials (`ParseCredential`)
/// to its viewer (`Auth`). Every top-level request passes here once, before its endpoint runs; a
/// batch's sub-requests act as their batch; the inline answers make the same step from memory.
///
/// The rules, in order: the application id must match (403 otherwise); a matching master key
/// makes the viewer master; otherwise a configured REST key must match (403). Then the session
/// token, unless the endpoint ignores it (login), is resolved by the accounts module's one
/// session-validity rule (`SessionStore.lookup`): an invalid one is 209, except with the master
/// key, which ignores it. The installation id is the request's, else the session's.
///
/// Features that depend on who the viewer is (a user's roles, cached per session; login
/// throttling and rate limits per viewer or address) belong in this step, so that every request
/// and every sub-request gets them; see docs/architecture.md, "Requests".
struct ParseAuthorizer: Sendable {
    let configuration: ParseConfiguration
    let sessions: SessionStore
    let roles: RoleStore

    /// What the keys grant.
    enum Access {
        case client, master
    }

    /// The key rule.
    @inline(__always)
    func access(_ headers: HTTPHeaders, _ envelope: ParseEnvelope?) throws(ParseFailure) -> Access {
        guard ParseCredential.applicationID.matches(configuration.applicationID, in: headers, envelope) else { throw .unauthorized }
        if let masterKey = configuration.masterKey, ParseCredential.masterKey.matches(masterKey, in: headers, envelope) { return .master }
        if let restKey = configuration.restAPIKey, !ParseCredential.restAPIKey.matches(restKey, in: headers, envelope) { throw .unauthorized }
        return .client
    }

    /// The viewer of a request with `headers` and `envelope`; `readsSession` is false for
    /// endpoints that ignore the session token (login).
    func authorize(_ headers: HTTPHeaders, _ envelope: ParseEnvelope?, readsSession: Bool, on db: any SQLExecutor) async throws(ParseFailure) -> Auth {
        let access = try access(headers, envelope)
        var session: SessionInfo?
        if readsSession, let token = ParseCredential.sessionToken.string(in: headers, envelope) {
            do {
                session = try await sessions.lookup(token, on: db)
            } catch {
                if access != .master { throw .parse(error) }
            }
        }
        var roleKeys: [String] = []
        if access == .client, let session {
            do {
                roleKeys = try await roles.permissionKeys(of: session.userId, on: db)
            } catch {
                throw .parse(error)
            }
        }
        return viewer(access, session, headers, envelope, roles: roleKeys)
    }

    /// `authorize` from memory alone, for a bodiless request answered on the event loop (no
    /// envelope): nil whenever the full step could answer otherwise (a refused key, a session
    /// that is not cached).
    @inline(__always)
    func authorizeFromMemory(_ headers: HTTPHeaders, readsSession: Bool) -> Auth? {
        guard let access = try? access(headers, nil) else { return nil }
        var session: SessionInfo?
        if readsSession {
            // An empty token is no token, as `ParseCredential.string` reads it on the full path.
            let cached = ParseCredential.sessionToken.withValue(in: headers, nil) { token -> CachedSession in
                token.isEmpty ? .none : sessions.cachedSession(token: token).map(CachedSession.valid) ?? .unknown
            } ?? .none
            switch cached {
            case .none: break
            case .valid(let info): session = info
            case .unknown: return nil
            }
        }
        var roleKeys: [String] = []
        if access == .client, let session {
            guard let cached = roles.cachedPermissionKeys(of: session.userId) else { return nil }
            roleKeys = cached
        }
        return viewer(access, session, headers, nil, roles: roleKeys)
    }

    private enum CachedSession {
        case none, valid(SessionInfo), unknown
    }

    @inline(__always)
    private func viewer(_ access: Access, _ session: SessionInfo?, _ headers: HTTPHeaders, _ envelope: ParseEnvelope?, roles: [String]) -> Auth {
        Auth(isMaster: access == .master, user: session,
             installationId: ParseCredential.installationID.string(in: headers, envelope) ?? session?.installationId, roles: roles)
    }
}
