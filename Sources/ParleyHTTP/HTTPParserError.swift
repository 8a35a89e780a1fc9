/// Why the request parser refused its input; `status` is the response to send before closing.
public enum HTTPParserError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The request line is not `method SP request-target SP HTTP-version CRLF`.
    case invalidRequestLine
    /// A method byte is not a token character.
    case invalidMethod
    /// A well-formed method Parley does not implement (501).
    case methodNotImplemented
    /// The request-target has a forbidden byte, an unsupported form or a bad percent-escape.
    case invalidTarget
    /// Not HTTP/1.0 or HTTP/1.1 (505).
    case unsupportedVersion
    /// A header name is empty or has a non-token byte (including whitespace before the colon).
    case invalidHeaderName
    /// A header value has a control byte.
    case invalidHeaderValue
    /// Whitespace at the start of a header line: obs-fold (RFC 9112 §5.2) or after the start line.
    case obsoleteLineFolding
    /// A CR not followed by LF.
    case bareCarriageReturn
    /// An LF not preceded by CR.
    case bareLineFeed
    /// Request line plus headers exceed the limit (431).
    case headTooLarge
    /// More header lines than the limit (431).
    case tooManyHeaders
    /// Content-Length is not a decimal number that fits 63 bits.
    case invalidContentLength
    /// More than one Content-Length field (llhttp's rule, even when the values agree).
    case duplicateContentLength
    /// Both Content-Length and Transfer-Encoding: a request-smuggling shape (RFC 9112 §6.1).
    case contentLengthWithTransferEncoding
    /// Transfer-Encoding whose final coding is not `chunked`, or `chunked` applied twice.
    case invalidTransferEncoding
    /// A transfer coding other than `chunked` before it (501, RFC 9112 §6.1).
    case unsupportedTransferEncoding
    /// Transfer-Encoding in an HTTP/1.0 request (faulty framing, RFC 9112 §6.1).
    case transferEncodingInHTTP10
    /// More than one Host field (RFC 9112 §3.2).
    case duplicateHost
    /// An Expect value other than `100-continue` (417).
    case unsupportedExpectation
    /// The body (declared or received so far) exceeds the limit (413).
    case bodyTooLarge
    /// A chunk-size line is not `1*HEXDIG [ chunk-ext ] CRLF`.
    case invalidChunkSize
    /// A malformed chunk extension.
    case invalidChunkExtension
    /// Chunk extensions longer than the limit.
    case chunkExtensionsTooLarge
    /// Chunk data not followed by CRLF.
    case invalidChunkTerminator
    /// A malformed trailer field line.
    case invalidTrailer
    /// Trailer section over the head limits (431).
    case trailersTooLarge
    /// Bytes other than CRLF after a request that closes the connection.
    case dataAfterClose

    /// The response status this error maps to.
    public var status: HTTPStatus {
        switch self {
        case .methodNotImplemented, .unsupportedTransferEncoding: .notImplemented
        case .unsupportedVersion: .httpVersionNotSupported
        case .headTooLarge, .tooManyHeaders, .trailersTooLarge: .requestHeaderFieldsTooLarge
        case .bodyTooLarge: .contentTooLarge
        case .unsupportedExpectation: .expectationFailed
        default: .badRequest
        }
    }

    public var description: String {
        switch self {
        case .invalidRequestLine: "invalid request line"
        case .invalidMethod: "invalid method"
        case .methodNotImplemented: "method not implemented"
        case .invalidTarget: "invalid request-target"
        case .unsupportedVersion: "unsupported HTTP version"
        case .invalidHeaderName: "invalid header name"
        case .invalidHeaderValue: "invalid header value"
        case .obsoleteLineFolding: "whitespace at the start of a header line"
        case .bareCarriageReturn: "CR not followed by LF"
        case .bareLineFeed: "LF without CR"
        case .headTooLarge: "request head too large"
        case .tooManyHeaders: "too many header fields"
        case .invalidContentLength: "invalid Content-Length"
        case .duplicateContentLength: "duplicate Content-Length"
        case .contentLengthWithTransferEncoding: "both Content-Length and Transfer-Encoding"
        case .invalidTransferEncoding: "invalid Transfer-Encoding"
        case .unsupportedTransferEncoding: "unsupported transfer coding"
        case .transferEncodingInHTTP10: "Transfer-Encoding in an HTTP/1.0 request"
        case .duplicateHost: "duplicate Host"
        case .unsupportedExpectation: "unsupported expectation"
        case .bodyTooLarge: "request body too large"
        case .invalidChunkSize: "invalid chunk size"
        case .invalidChunkExtension: "invalid chunk extension"
        case .chunkExtensionsTooLarge: "chunk extensions too large"
        case .invalidChunkTerminator: "chunk data not followed by CRLF"
        case .invalidTrailer: "invalid trailer field"
        case .trailersTooLarge: "trailer section too large"
        case .dataAfterClose: "data after a request that closes the connection"
        }
    }
}

/// Limits the parser enforces; every one maps to a status (see `HTTPParserError.status`).
public struct HTTPParserLimits: Sendable, Hashable {
    /// Request line plus header section, CRLFs included (→ 431).
    public var maxHeadBytes: Int
    /// Header field lines per request (→ 431).
    public var maxHeaderCount: Int
    /// Body bytes per request, Content-Length or cumulative chunk data (→ 413).
    public var maxBodyBytes: Int
    /// Chunk-extension bytes per request, all chunks together (→ 400).
    public var maxChunkExtensionBytes: Int

    public init(maxHeadBytes: Int = 16 * 1024, maxHeaderCount: Int = 100, maxBodyBytes: Int = 1 << 20, maxChunkExtensionBytes: Int = 4096) {
        precondition(maxHeadBytes > 0 && maxHeadBytes < Int(UInt32.max), "maxHeadBytes out of range")
        precondition(maxHeaderCount > 0 && maxBodyBytes >= 0 && maxChunkExtensionBytes >= 0, "negative limit")
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxBodyBytes = maxBodyBytes
        self.maxChunkExtensionBytes = maxChunkExtensionBytes
    }
}
