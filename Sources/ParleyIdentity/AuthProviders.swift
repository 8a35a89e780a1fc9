import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyNet

/// The enabled login providers by `authData` name, and the HTTP client they share.
public final class AuthProviders: Sendable {
    /// Longest provider user id accepted, in bytes.
    public static let maxIDBytes = 256
    /// Longest provider name accepted, in bytes.
    public static let maxNameBytes = 64

    public let configuration: IdentityConfiguration
    private let providers: [String: any AuthProvider]
    private let client: HTTPClient?

    /// Builds the providers of `configuration`; their requests go through one client on `group`
    /// (`blockingPool` resolves host names).
    public init(configuration: IdentityConfiguration, group: EventLoopGroup, blockingPool: BlockingPool?, logger: Logger = Logger(label: "identity")) {
        self.configuration = configuration
        let needsClient = configuration.apple != nil || configuration.google != nil || configuration.facebook != nil || !configuration.openIDConnect.isEmpty
        let client = needsClient ? HTTPClient(group: group, configuration: HTTPClient.Configuration(
            connectTimeout: min(.seconds(5), configuration.requestTimeout), requestTimeout: configuration.requestTimeout,
            maxConnectionsPerHost: 4, maxQueuedRequestsPerHost: 256,
            responseLimits: HTTPResponseParser.Limits(maxBodyBytes: JSONWebKeySet.maxDocumentBytes), userAgent: "parley-identity",
            tlsCAFile: configuration.tlsCAFile),
            blockingPool: blockingPool) : nil
        self.client = client
        var providers: [String: any AuthProvider] = [:]
        if configuration.anonymous { providers["anonymous"] = AnonymousProvider() }
        if let client {
            for oidc in [configuration.apple, configuration.google].compactMap({ $0 }) + configuration.openIDConnect {
                let keys = JWKSCache(provider: oidc.name, configuration: JWKSCache.Configuration(
                    url: oidc.jwksURL, refetchInterval: configuration.jwksRefetchInterval, timeout: configuration.requestTimeout),
                    client: client, logger: logger)
                let verifier = IDTokenVerifier(rules: .init(issuers: oidc.issuers, audiences: oidc.audiences, leeway: configuration.leeway), keys: keys)
                providers[oidc.name] = OpenIDConnectProvider(name: oidc.name, verifier: verifier, tokenFields: oidc.tokenFields)
            }
            if let facebook = configuration.facebook { providers["facebook"] = FacebookProvider(configuration: facebook, client: client) }
        }
        self.providers = providers
    }

    /// The provider named `name`, or `unsupportedProvider` when it is unknown or disabled.
    public func provider(_ name: String) throws(IdentityError) -> any AuthProvider {
        guard let provider = providers[name] else { throw .unsupportedProvider(String(name.prefix(Self.maxNameBytes))) }
        return provider
    }

    /// Verifies `authData` of provider `name`; returns the id it proves.
    public func validate(provider name: String, authData: JSONObject) async throws(IdentityError) -> String {
        try await provider(name).validate(authData: authData)
    }

    /// Stops the HTTP client (in-flight checks fail as unavailable).
    public func shutdown() {
        client?.shutdown()
    }
}
