/// Why an `authData` entry was refused. Parse Server answers 252 for an unknown or disabled
/// provider and 101 for everything else; the accounts module maps these to the wire once.
public enum IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No such provider, or it is disabled (Parse 252).
    case unsupportedProvider(String)
    /// The authData is malformed: a field missing or of the wrong type (Parse 101).
    case malformedAuthData(String)
    /// The token or access token does not prove the id (Parse 101): bad signature, wrong
    /// issuer or audience, expired, unknown key, another user's token.
    case invalidToken(String)
    /// The provider could not be asked (network, bad answer) and no cached key could decide.
    /// Parse 101 as well: a client cannot tell it from a bad token, the log can.
    case providerUnavailable(provider: String, detail: String)

    /// Parse Server's error code for this refusal.
    public var parseCode: Int {
        switch self {
        case .unsupportedProvider: 252
        case .malformedAuthData, .invalidToken, .providerUnavailable: 101
        }
    }

    /// The message for the client.
    public var message: String {
        switch self {
        case .unsupportedProvider: "This authentication method is unsupported."
        case .malformedAuthData(let text), .invalidToken(let text): text
        case .providerUnavailable(let provider, _): "\(provider) auth could not be verified now; try again later."
        }
    }

    public var description: String {
        switch self {
        case .unsupportedProvider(let name): "unsupported provider \(name)"
        case .malformedAuthData(let text): "malformed authData: \(text)"
        case .invalidToken(let text): "invalid token: \(text)"
        case .providerUnavailable(let provider, let detail): "\(provider) unavailable: \(detail)"
        }
    }
}
