import COpenSSL

/// The JWS algorithms Parley verifies: RSA PKCS#1 v1.5 and ECDSA with SHA-2 (RFC 7518).
/// `none` and the HMAC algorithms have no case: a token naming them is refused, since a
/// provider's public key must never be usable as a shared secret.
public enum SignatureAlgorithm: String, Sendable, CaseIterable {
    case rs256 = "RS256"
    case rs384 = "RS384"
    case rs512 = "RS512"
    case es256 = "ES256"
    case es384 = "ES384"

    /// The key type a JWK must have for this algorithm.
    var keyType: String {
        switch self {
        case .rs256, .rs384, .rs512: "RSA"
        case .es256, .es384: "EC"
        }
    }

    /// The curve of an ECDSA algorithm (RFC 7518 3.4: ES256 only with P-256, ES384 with P-384).
    var curve: String? {
        switch self {
        case .es256: "P-256"
        case .es384: "P-384"
        case .rs256, .rs384, .rs512: nil
        }
    }

    /// Bytes of r and of s in a JWS ECDSA signature.
    var ecdsaComponentBytes: Int? {
        switch self {
        case .es256: 32
        case .es384: 48
        case .rs256, .rs384, .rs512: nil
        }
    }

    var digest: OpaquePointer? {
        switch self {
        case .rs256, .es256: EVP_sha256()
        case .rs384, .es384: EVP_sha384()
        case .rs512: EVP_sha512()
        }
    }
}
