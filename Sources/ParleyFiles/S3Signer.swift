import ParleyHTTP
import ParleyNet

/// AWS Signature Version 4 for S3 requests (header form, payload hashed).
public struct S3Signer: Sendable {
    public var accessKey: String
    public var secretKey: String
    public var region: String

    public init(accessKey: String, secretKey: String, region: String) {
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.region = region
    }

    /// The `Authorization` value for a request; `headers` must hold every header to sign
    /// (`host`, `x-amz-date`, `x-amz-content-sha256` included), `path` already encoded.
    public func authorization(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                              payloadHash: String, amzDate: String) -> String {
        let canonicalHeaders = headers.map { ($0.0.lowercased(), $0.1.trimmingSpaces()) }.sorted { $0.0 < $1.0 }
        let signedHeaders = canonicalHeaders.map(\.0).joined(separator: ";")
        let canonicalQuery = query.map { (Self.encode($0.0), Self.encode($0.1)) }.sorted { $0 < $1 }
            .map { $0.0 + "=" + $0.1 }.joined(separator: "&")
        let canonicalRequest = [method, path, canonicalQuery, canonicalHeaders.map { $0.0 + ":" + $0.1 + "\n" }.joined(),
                                signedHeaders, payloadHash].joined(separator: "\n")
        let day = String(amzDate.prefix(8))
        let scope = day + "/" + region + "/s3/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + SHA256Digest.hex(SHA256Digest.hash(Array(canonicalRequest.utf8)))
        var key = HMACDigest.sha256(key: Array(("AWS4" + secretKey).utf8), message: Array(day.utf8))
        for part in [region, "s3", "aws4_request"] { key = HMACDigest.sha256(key: key, message: Array(part.utf8)) }
        let signature = SHA256Digest.hex(HMACDigest.sha256(key: key, message: Array(stringToSign.utf8)))
        return "AWS4-HMAC-SHA256 Credential=" + accessKey + "/" + scope + ", SignedHeaders=" + signedHeaders + ", Signature=" + signature
    }

    /// URI-encodes `text` as SigV4 asks: unreserved characters kept, `/` too when `keepSlash`.
    public static func encode(_ text: String, keepSlash: Bool = false) -> String {
        PercentEncoding.escaped(text, keepingSlash: keepSlash)
    }
}
