import ParleyJSON
import ParleyNet
import ParleyRealtime

/// Time-limited TURN credentials in coturn's shared-secret ("TURN REST API") format.
///
/// `username` is `<expiry unix seconds>:<userId>`; `password` is the base64 of
/// HMAC-SHA1(secret, username). The TURN server recomputes the password from the username and
/// refuses it after the expiry, so Parley never talks to the TURN server.
public struct TURNCredentials: Sendable, Equatable {
    public var uris: [String]
    public var username: String
    public var password: String
    /// Seconds the credential stays valid from when it was issued.
    public var ttl: Int64

    /// Credentials for `userId`, valid for `configuration.ttl` from `nowSeconds`.
    public init(userId: String, configuration: TURNConfiguration, nowSeconds: Int64) {
        let ttl = max(1, configuration.ttl.components.seconds)
        uris = configuration.uris
        username = "\(nowSeconds + ttl):\(userId)"
        password = TURNCredentials.password(username: username, secret: configuration.secret)
        self.ttl = ttl
    }

    /// The coturn password for `username`: base64(HMAC-SHA1(secret, username)).
    public static func password(username: String, secret: String) -> String {
        Base64.encode(HMACDigest.sha1(key: Array(secret.utf8), message: Array(username.utf8)))
    }

    /// `{uris, username, password, ttl}` as `GET /v1/turn` returns it.
    public var json: JSONValue {
        ["uris": .array(uris.map { .string($0) }), "username": .string(username), "password": .string(password), "ttl": .int(ttl)]
    }
}
