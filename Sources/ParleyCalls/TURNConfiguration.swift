/// Where clients find TURN relays and the secret shared with them (coturn's
/// `--use-auth-secret --static-auth-secret=…`).
public struct TURNConfiguration: Sendable, Equatable {
    /// `turn:` / `turns:` URIs handed to clients as they are.
    public var uris: [String]
    /// The shared secret; credentials are HMAC-SHA1 of the username with it.
    public var secret: String
    /// How long a credential stays valid.
    public var ttl: Duration

    public init(uris: [String], secret: String, ttl: Duration = .seconds(86_400)) {
        self.uris = uris
        self.secret = secret
        self.ttl = ttl
    }

    /// A configuration when both URIs and a secret are given, else nil (TURN disabled).
    public static func ifEnabled(uris: [String], secret: String?, ttl: Duration) -> TURNConfiguration? {
        guard let secret, !secret.isEmpty, !uris.isEmpty else { return nil }
        return TURNConfiguration(uris: uris, secret: secret, ttl: ttl)
    }
}
