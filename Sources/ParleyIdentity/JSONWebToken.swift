import ParleyJSON
import ParleyNet

/// A compact JWS (`header.payload.signature`, RFC 7515) split and decoded, not yet verified.
public struct JSONWebToken: Sendable {
    public let header: JSONObject
    public let claims: JSONObject
    public let algorithm: SignatureAlgorithm
    public let keyID: String?
    /// `header.payload` as sent: the bytes the signature covers.
    public let signingInput: [UInt8]
    public let signature: [UInt8]

    /// Longest token accepted, in bytes.
    public static let maxBytes = 16 * 1024

    /// Decodes `token`. Refuses what can never verify: not three parts, bad base64url or JSON,
    /// an algorithm that is `none`, symmetric or unknown, critical extensions, no signature.
    public init(_ token: String) throws(IdentityError) {
        let bytes = Array(token.utf8)
        guard bytes.count <= Self.maxBytes else { throw .invalidToken("token too long") }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .invalidToken("provided token does not decode as JWT") }
        guard let headerBytes = Base64.decodeURL(parts[0]), let payloadBytes = Base64.decodeURL(parts[1]),
              let signature = Base64.decodeURL(parts[2])
        else { throw .invalidToken("provided token does not decode as JWT") }
        let parser = JSONParser(maxDepth: 16, maxBytes: Self.maxBytes)
        guard case .object(let header)? = try? parser.parse(headerBytes), case .object(let claims)? = try? parser.parse(payloadBytes) else {
            throw .invalidToken("provided token does not decode as JWT")
        }
        guard let name = header["alg"]?.string else { throw .invalidToken("token has no algorithm") }
        guard let algorithm = SignatureAlgorithm(rawValue: name) else { throw .invalidToken("token algorithm \(name) is not accepted") }
        guard header["crit"] == nil else { throw .invalidToken("token has critical header extensions") }
        guard !signature.isEmpty else { throw .invalidToken("token is not signed") }
        if let kid = header["kid"], kid.string == nil { throw .invalidToken("token kid is not a string") }
        self.header = header
        self.claims = claims
        self.algorithm = algorithm
        keyID = header["kid"]?.string
        signingInput = Array(bytes[..<(parts[1].endIndex)])
        self.signature = signature
    }

    /// Whether one of `keys` verifies the signature.
    public func isSigned(byOneOf keys: [JSONWebKey]) -> Bool {
        keys.contains { $0.key.verify(signature: signature, message: signingInput, algorithm: algorithm) }
    }
}
