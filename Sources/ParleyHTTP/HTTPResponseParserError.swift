/// Why the response parser refused what the server sent.
public enum HTTPResponseParserError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The status line is not `HTTP/1.x SP 3DIGIT [SP reason] CRLF`.
    case invalidStatusLine
    /// Not HTTP/1.0 or HTTP/1.1.
    case unsupportedVersion
    /// A header name is empty or has a non-token byte.
    case invalidHeaderName
    /// A header value has a control byte.
    case invalidHeaderValue
    /// A header line that starts with whitespace (obs-fold).
    case obsoleteLineFolding
    /// Status line plus headers exceed the limit.
    case headTooLarge
    /// More header lines than the limit.
    case tooManyHeaders
    /// Content-Length is not a decimal number, or several disagree.
    case invalidContentLength
    /// Transfer-Encoding lists `chunked` other than last, or twice.
    case invalidTransferEncoding
    /// The body (declared or received so far) exceeds the limit.
    case bodyTooLarge
    /// A chunk-size line is malformed or too long.
    case invalidChunkSize
    /// Chunk data not followed by CRLF.
    case invalidChunkTerminator
    /// The trailer section is malformed or too large.
    case invalidTrailer
    /// The connection closed before any byte of the response arrived.
    case closedBeforeResponse
    /// The connection closed in the middle of the response.
    case truncatedResponse
    /// Bytes arrived when no response was expected.
    case unexpectedData

    public var description: String {
        switch self {
        case .invalidStatusLine: "invalid status line"
        case .unsupportedVersion: "unsupported HTTP version"
        case .invalidHeaderName: "invalid header name"
        case .invalidHeaderValue: "invalid header value"
        case .obsoleteLineFolding: "obsolete line folding"
        case .headTooLarge: "response head too large"
        case .tooManyHeaders: "too many response headers"
        case .invalidContentLength: "invalid Content-Length"
        case .invalidTransferEncoding: "invalid Transfer-Encoding"
        case .bodyTooLarge: "response body too large"
        case .invalidChunkSize: "invalid chunk size"
        case .invalidChunkTerminator: "chunk data not followed by CRLF"
        case .invalidTrailer: "invalid trailer section"
        case .closedBeforeResponse: "connection closed before the response"
        case .truncatedResponse: "connection closed in the middle of the response"
        case .unexpectedData: "data received when no response was expected"
        }
    }
}
