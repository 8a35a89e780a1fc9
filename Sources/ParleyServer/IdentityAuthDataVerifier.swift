import ParleyAccounts
import ParleyIdentity
import ParleyJSON
import ParleyLog

/// The accounts module's `authData` verifier, backed by the enabled login providers: the one
/// place where an `IdentityError` becomes a Parse error (252 unknown or disabled, 101 otherwise).
struct IdentityAuthDataVerifier: AuthDataVerifier {
    let providers: AuthProviders
    let logger: Logger

    func verify(provider: String, data: JSONObject) async throws(ParseError) -> String {
        do {
            return try await providers.validate(provider: provider, authData: data)
        } catch {
            switch error {
            case .unsupportedProvider:
                throw ParseError.unsupportedService(error.message)
            case .providerUnavailable:
                logger.warning("login provider unavailable", [("provider", provider), ("error", error.description)])
                throw ParseError.objectNotFound(error.message)
            case .malformedAuthData, .invalidToken:
                logger.info("authData refused", [("provider", provider), ("error", error.description)])
                throw ParseError.objectNotFound(error.message)
            }
        }
    }
}
