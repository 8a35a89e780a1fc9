import ParleyAccounts
import ParleyRealtime

/// The realtime service's authenticator, backed by the accounts module: a socket `hello` and
/// every `/v1` request are checked by the same session-validity rule as the Parse API
/// (`SessionStore.lookup`: not revoked, not expired, user not banned; cached sessions dropped on
/// every node by account events). Realtime never reads the `sessions` or `users` tables.
struct AccountsRealtimeAuthenticator: RealtimeAuthenticator {
    let accounts: Accounts

    func authenticate(sessionToken: String) async throws -> RealtimeIdentity? {
        do {
            let session = try await accounts.sessions.lookup(sessionToken, on: accounts.database)
            return RealtimeIdentity(userId: session.userId, sessionExpiresAt: session.expiresAt)
        } catch {
            // 209 is an answer (no such valid session); anything else means no answer.
            if case .invalidSessionToken = error { return nil }
            throw error
        }
    }

    func userExists(_ userId: String) async throws -> Bool {
        try await accounts.users.exists(objectId: userId, on: accounts.database)
    }
}
