import ParleyJSON
import ParleyLog

/// Verifies an OpenID Connect ID token: signature by one of the issuer's keys, then the claims
/// `iss`, `aud`, `exp`, `nbf`, `iat` (with leeway for clock skew) and `sub`.
public struct IDTokenVerifier: Sendable {
    /// What a token must say about itself.
    public struct Rules: Sendable {
        /// Accepted `iss` values (Google signs with and without `https://`).
        public var issuers: [String]
        /// Accepted audiences (the app's client ids): `aud` must be or contain one.
        public var audiences: [String]
        /// Clock skew allowed on `exp`, `nbf` and `iat`.
        public var leeway: Duration

        public init(issuers: [String], audiences: [String], leeway: Duration = .seconds(30)) {
            self.issuers = issuers
            self.audiences = audiences
            self.leeway = leeway
        }
    }

    public let rules: Rules
    public let keys: JWKSCache

    public init(rules: Rules, keys: JWKSCache) {
        self.rules = rules
        self.keys = keys
    }

    /// The token's claims if it is valid now and names `subject`; the reason otherwise.
    public func verify(_ token: String, subject: String, nowMilliseconds: Int64 = UTCTime.nowMilliseconds()) async throws(IdentityError) -> JSONObject {
        let decoded = try JSONWebToken(token)
        let candidates = try await keys.keys(keyID: decoded.keyID, algorithm: decoded.algorithm)
        guard decoded.isSigned(byOneOf: candidates) else { throw .invalidToken("invalid signature") }
        try check(decoded.claims, subject: subject, nowMilliseconds: nowMilliseconds)
        return decoded.claims
    }

    /// The claim checks alone (the signature is already verified).
    func check(_ claims: JSONObject, subject: String, nowMilliseconds: Int64) throws(IdentityError) {
        let issuer = claims["iss"]?.string
        guard let issuer, rules.issuers.contains(issuer) else {
            throw .invalidToken("id token not issued by correct OpenID provider - expected: \(rules.issuers.joined(separator: " or ")) | from: \(issuer ?? "(none)")")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let one)?: audiences = [one]
        case .array(let many)?: audiences = many.compactMap(\.string)
        default: audiences = []
        }
        guard audiences.contains(where: rules.audiences.contains) else { throw .invalidToken("jwt audience invalid. expected: \(rules.audiences.joined(separator: " or "))") }
        let now = Double(nowMilliseconds) / 1000
        let leeway = Double(rules.leeway.components.seconds) + Double(rules.leeway.components.attoseconds) / 1e18
        guard let expires = claims["exp"]?.double else { throw .invalidToken("jwt has no expiry") }
        guard now < expires + leeway else { throw .invalidToken("jwt expired") }
        if let notBefore = claims["nbf"] {
            guard let value = notBefore.double else { throw .invalidToken("invalid nbf value") }
            guard now + leeway >= value else { throw .invalidToken("jwt not active") }
        }
        if let issuedAt = claims["iat"] {
            guard let value = issuedAt.double else { throw .invalidToken("invalid iat value") }
            guard value <= now + leeway else { throw .invalidToken("jwt issued in the future") }
        }
        guard claims["sub"]?.string == subject else { throw .invalidToken("auth data is invalid for this user.") }
    }
}
