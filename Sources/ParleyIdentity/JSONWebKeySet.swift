import ParleyJSON
import ParleyNet

/// One verification key of a JWKS document (RFC 7517): its id, type, the algorithm it is
/// restricted to (if the document says), and the OpenSSL key.
public struct JSONWebKey: Sendable {
    public let keyID: String?
    /// `RSA` or `EC`.
    public let keyType: String
    /// The EC curve (`P-256`, `P-384`); nil for RSA.
    public let curve: String?
    /// The `alg` member, when present: the key verifies only that algorithm.
    public let algorithm: SignatureAlgorithm?
    public let key: PublicKey

    /// Whether this key may verify a signature made with `algorithm` (type, curve and `alg` agree).
    public func permits(_ algorithm: SignatureAlgorithm) -> Bool {
        if let own = self.algorithm, own != algorithm { return false }
        return keyType == algorithm.keyType && curve == algorithm.curve
    }

    /// A key from one JWK object; nil for keys Parley cannot use (encryption keys, symmetric or
    /// unknown types, bad numbers, an `alg` it does not verify).
    public init?(_ object: JSONObject) {
        if let use = object["use"]?.string, use != "sig" { return nil }
        var algorithm: SignatureAlgorithm?
        if let name = object["alg"]?.string {
            guard let known = SignatureAlgorithm(rawValue: name) else { return nil }
            algorithm = known
        }
        guard let type = object["kty"]?.string else { return nil }
        switch type {
        case "RSA":
            guard let n = object["n"]?.string.flatMap({ Base64.decodeURL($0.utf8) }),
                  let e = object["e"]?.string.flatMap({ Base64.decodeURL($0.utf8) }),
                  let key = PublicKey.rsa(modulus: n, exponent: e)
            else { return nil }
            self.key = key
            curve = nil
        case "EC":
            guard let crv = object["crv"]?.string,
                  let x = object["x"]?.string.flatMap({ Base64.decodeURL($0.utf8) }),
                  let y = object["y"]?.string.flatMap({ Base64.decodeURL($0.utf8) }),
                  let key = PublicKey.ec(curve: crv, x: x, y: y)
            else { return nil }
            self.key = key
            curve = crv
        default:
            return nil
        }
        keyType = type
        keyID = object["kid"]?.string
        self.algorithm = algorithm
    }
}

/// A JWKS document's usable keys.
public struct JSONWebKeySet: Sendable {
    public let keys: [JSONWebKey]
    /// Keys in the document that were skipped (other uses or types, malformed).
    public let skipped: Int

    /// Largest JWKS document accepted, in bytes.
    public static let maxDocumentBytes = 256 * 1024
    /// Most keys kept from one document.
    public static let maxKeys = 64

    public init(keys: [JSONWebKey], skipped: Int = 0) {
        self.keys = keys
        self.skipped = skipped
    }

    /// Parses `{"keys":[…]}`; nil if it is not such a document.
    public init?<Bytes: Collection<UInt8>>(document: Bytes) {
        guard document.count <= Self.maxDocumentBytes,
              case .object(let root)? = try? JSONParser(maxDepth: 16, maxBytes: Self.maxDocumentBytes).parse(document),
              let list = root["keys"]?.array
        else { return nil }
        var keys: [JSONWebKey] = []
        var skipped = 0
        for entry in list {
            if keys.count < Self.maxKeys, let object = entry.object, let key = JSONWebKey(object) {
                keys.append(key)
            } else {
                skipped += 1
            }
        }
        self.init(keys: keys, skipped: skipped)
    }

    /// The keys that may verify a token with this `kid` and algorithm. A token without `kid`
    /// matches every key of a fitting type.
    public func candidates(keyID: String?, algorithm: SignatureAlgorithm) -> [JSONWebKey] {
        keys.filter { key in
            guard key.permits(algorithm) else { return false }
            guard let keyID else { return true }
            return key.keyID == keyID
        }
    }
}
