import ParleyHTTP

/// Where and how `S3FileStorage` reaches an S3-compatible bucket.
public struct S3Settings: Sendable {
    /// Scheme, host and port of the service (`https://s3.eu-west-1.amazonaws.com`); its path is ignored.
    public var endpoint: HTTPClientURL
    public var bucket: String
    public var region: String
    public var accessKey: String
    public var secretKey: String
    /// `endpoint/bucket/key` when true, `bucket.endpoint/key` (virtual-host style) when false.
    public var pathStyle: Bool
    /// Bytes per part of a multipart upload; a smaller upload is one `PUT` (S3's minimum part is 5 MiB).
    public var partBytes: Int
    /// Bytes per ranged `GET` of a download.
    public var readChunkBytes: Int
    /// Deadline of one request to the service.
    public var requestTimeout: Duration

    public init(endpoint: HTTPClientURL, bucket: String, region: String, accessKey: String, secretKey: String, pathStyle: Bool,
                partBytes: Int = 8 << 20, readChunkBytes: Int = 1 << 20, requestTimeout: Duration = .seconds(60)) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.pathStyle = pathStyle
        self.partBytes = max(1, partBytes)
        self.readChunkBytes = max(1, readChunkBytes)
        self.requestTimeout = requestTimeout
    }

    /// The encoded path of `key`, path- or virtual-host style.
    func path(key: String) -> String {
        let encodedKey = S3Signer.encode(key, keepSlash: true)
        return pathStyle ? "/" + S3Signer.encode(bucket) + "/" + encodedKey : "/" + encodedKey
    }

    /// The URL of `path` with `query` (a parameter with an empty value is sent bare, as `?uploads`).
    func url(path: String, query: [(String, String)]) -> HTTPClientURL {
        let host = pathStyle ? endpoint.host : bucket + "." + endpoint.host
        let queryText = query.map { S3Signer.encode($0.0) + ($0.1.isEmpty ? "" : "=" + S3Signer.encode($0.1)) }.joined(separator: "&")
        return HTTPClientURL(host: host, port: endpoint.port, target: queryText.isEmpty ? path : path + "?" + queryText, secure: endpoint.isSecure)
    }
}
