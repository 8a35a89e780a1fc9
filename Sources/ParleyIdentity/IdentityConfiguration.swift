import ParleyHTTP

/// Which login providers are enabled and how each verifies its tokens. A provider is enabled
/// by being configured; `anonymous` by its switch.
public struct IdentityConfiguration: Sendable {
    public var anonymous: Bool
    public var apple: OpenIDConnectConfiguration?
    public var google: OpenIDConnectConfiguration?
    public var facebook: FacebookConfiguration?
    /// Further OpenID Connect providers, each under its own `authData` name.
    public var openIDConnect: [OpenIDConnectConfiguration]
    /// Clock skew allowed on token times.
    public var leeway: Duration
    /// Least time between two JWKS fetches of one provider.
    public var jwksRefetchInterval: Duration
    /// Deadline of one request to a provider.
    public var requestTimeout: Duration
    /// PEM CA bundle `https` providers are verified against; nil = the system store.
    public var tlsCAFile: String?

    public init(anonymous: Bool = true, apple: OpenIDConnectConfiguration? = nil, google: OpenIDConnectConfiguration? = nil,
                facebook: FacebookConfiguration? = nil, openIDConnect: [OpenIDConnectConfiguration] = [], leeway: Duration = .seconds(30),
                jwksRefetchInterval: Duration = .seconds(30), requestTimeout: Duration = .seconds(10)) {
        self.anonymous = anonymous
        self.apple = apple
        self.google = google
        self.facebook = facebook
        self.openIDConnect = openIDConnect
        self.leeway = leeway
        self.jwksRefetchInterval = jwksRefetchInterval
        self.requestTimeout = requestTimeout
    }

    /// The names of the enabled providers.
    public var enabledProviders: [String] {
        var names: [String] = []
        if anonymous { names.append("anonymous") }
        if apple != nil { names.append("apple") }
        if google != nil { names.append("google") }
        if facebook != nil { names.append("facebook") }
        names += openIDConnect.map(\.name)
        return names
    }
}

/// One OpenID Connect provider: its `authData` name, issuer(s), JWKS URL and the client ids
/// its tokens must be for.
public struct OpenIDConnectConfiguration: Sendable {
    public var name: String
    public var issuers: [String]
    public var jwksURL: HTTPClientURL
    public var audiences: [String]
    /// The `authData` members that may carry the ID token.
    public var tokenFields: [String]

    public init(name: String, issuers: [String], jwksURL: HTTPClientURL, audiences: [String], tokenFields: [String] = ["id_token", "token"]) {
        self.name = name
        self.issuers = issuers
        self.jwksURL = jwksURL
        self.audiences = audiences
        self.tokenFields = tokenFields
    }

    /// Sign in with Apple: `authData.apple = {id, token}`.
    public static let appleIssuer = "https://appleid.apple.com"
    public static let appleJWKS = "https://appleid.apple.com/auth/keys"
    /// Google: `authData.google = {id, id_token}`; Google's tokens name either issuer.
    public static let googleIssuers = ["https://accounts.google.com", "accounts.google.com"]
    public static let googleJWKS = "https://www.googleapis.com/oauth2/v3/certs"

    public static func apple(jwksURL: HTTPClientURL, audiences: [String], issuer: String = appleIssuer) -> OpenIDConnectConfiguration {
        OpenIDConnectConfiguration(name: "apple", issuers: [issuer], jwksURL: jwksURL, audiences: audiences, tokenFields: ["token", "id_token"])
    }

    public static func google(jwksURL: HTTPClientURL, audiences: [String], issuers: [String] = googleIssuers) -> OpenIDConnectConfiguration {
        OpenIDConnectConfiguration(name: "google", issuers: issuers, jwksURL: jwksURL, audiences: audiences, tokenFields: ["id_token"])
    }
}
