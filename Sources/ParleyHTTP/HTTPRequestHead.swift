#if canImport(Glibc)
import Glibc
#endif

/// How a request's body is delimited.
public enum HTTPBodyFraming: Sendable, Hashable {
    /// `Content-Length` bytes (0 when the request has neither Content-Length nor Transfer-Encoding).
    case contentLength(Int)
    /// `Transfer-Encoding: chunked`.
    case chunked
}

/// The request line and header section of one request.
public struct HTTPRequestHead: Sendable {
    public let method: HTTPMethod
    public let version: HTTPVersion
    /// The header fields; mutable so middleware can add or replace fields.
    public var headers: HTTPHeaders
    /// The percent-decoded path (`/` for an absolute-form target without a path, `*` for asterisk-form).
    ///
    /// Decoded on each use (the parser has checked that it decodes): many requests never ask.
    public var path: String {
        guard !pathSpan.range.isEmpty else { return "/" }
        return raw.withUnsafeBufferPointer { bytes in
            let rawPath = UnsafeBufferPointer(rebasing: bytes[pathSpan.range])
            return PercentDecoding.decodePath(rawPath) ?? String(decoding: rawPath, as: UTF8.self)
        }
    }
    /// Whether the connection stays open after this request (HTTP/1.1 unless `close`; HTTP/1.0 only with `keep-alive`).
    public let keepAlive: Bool
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    public let expectContinue: Bool
    /// `Connection: upgrade` plus an `Upgrade` field on an HTTP/1.1 request: the parser stops after it.
    public let isUpgrade: Bool
    /// How the body is delimited.
    public let bodyFraming: HTTPBodyFraming

    /// The raw head bytes the spans below point into (shared with `headers` until it is changed).
    let raw: [UInt8]
    // Spans rather than `Range<Int>?`: trivial fields keep copying and destroying a head cheap.
    private let targetSpan: HeadSpan
    /// The raw (still percent-encoded) path, for the router.
    private let pathSpan: HeadSpan
    /// Empty at 0 and `hasQuery` false without `?`.
    private let querySpan: HeadSpan
    private let hasQuery: Bool

    var targetRange: Range<Int> { targetSpan.range }
    var pathRange: Range<Int> { pathSpan.range }
    var queryRange: Range<Int>? { hasQuery ? querySpan.range : nil }

    init(
        method: HTTPMethod, version: HTTPVersion, headers: HTTPHeaders, raw: [UInt8], target: HTTPRequestTarget,
        keepAlive: Bool, expectContinue: Bool, isUpgrade: Bool, bodyFraming: HTTPBodyFraming
    ) {
        self.method = method
        self.version = version
        self.headers = headers
        self.raw = raw
        self.targetSpan = HeadSpan(target.targetRange)
        self.pathSpan = HeadSpan(target.pathRange)
        self.querySpan = target.queryRange.map(HeadSpan.init) ?? HeadSpan(0..<0)
        self.hasQuery = target.queryRange != nil
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
        self.isUpgrade = isUpgrade
        self.bodyFraming = bodyFraming
    }

    /// A head built in code (tests, internal requests). Framing and keep-alive follow the headers
    /// as the parser would read them.
    public init(method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) throws(HTTPParserError) {
        let raw = Array(target.utf8)
        guard !raw.isEmpty, raw.allSatisfy(HTTPCharacterClass.isTarget) else { throw .invalidTarget }
        let parsed = try raw.withUnsafeBufferPointer { bytes throws(HTTPParserError) in
            try HTTPRequestTarget.parse(bytes, range: 0..<bytes.count)
        }
        let close = headers.containsToken("close", in: "Connection")
        let keepAlive = version == .http1_1 ? !close : (!close && headers.containsToken("keep-alive", in: "Connection"))
        var framing = HTTPBodyFraming.contentLength(0)
        if headers.contains("Transfer-Encoding") {
            framing = .chunked
        } else if let length = headers["Content-Length"].flatMap({ Int($0) }) {
            framing = .contentLength(length)
        }
        self.init(
            method: method, version: version, headers: headers, raw: raw, target: parsed, keepAlive: keepAlive,
            expectContinue: version == .http1_1 && headers["Expect"]?.lowercased() == "100-continue",
            isUpgrade: version == .http1_1 && headers.containsToken("upgrade", in: "Connection") && headers.contains("Upgrade"),
            bodyFraming: framing)
    }

    /// The request-target exactly as received.
    public var target: String { string(targetRange) }

    /// The raw query (after `?`, before any `#`), still percent-encoded; nil without `?`.
    public var query: String? { queryRange.map(string) }

    /// The first value of query parameter `name`, decoded (`+` is a space).
    public func queryParameter(_ name: String) -> String? {
        var result: String?
        forEachQueryParameter { key, value in
            if result == nil, key == name { result = value }
        }
        return result
    }

    /// All query parameters in order, decoded.
    public var queryParameters: [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        forEachQueryParameter { result.append(($0, $1)) }
        return result
    }

    /// Whether the request carries a body (non-zero Content-Length or chunked).
    public var hasBody: Bool {
        if case .contentLength(0) = bodyFraming { return false }
        return true
    }

    private func forEachQueryParameter(_ body: (String, String) -> Void) {
        guard let queryRange else { return }
        raw.withUnsafeBufferPointer { bytes in
            var start = queryRange.lowerBound
            while start <= queryRange.upperBound {
                let end = HTTPRequestHead.firstIndex(of: 0x26, in: bytes, start..<queryRange.upperBound)
                if end > start {
                    let equals = HTTPRequestHead.firstIndex(of: .equals, in: bytes, start..<end)
                    let key = PercentDecoding.decodeQueryComponent(UnsafeBufferPointer(rebasing: bytes[start..<equals]))
                    let value = equals < end
                        ? PercentDecoding.decodeQueryComponent(UnsafeBufferPointer(rebasing: bytes[(equals + 1)..<end]))
                        : ""
                    body(key, value)
                }
                start = end + 1
            }
        }
    }

    /// Where `byte` first is in `bytes[range]`, else `range.upperBound` (`memchr`: a query's
    /// values are long runs without `&`).
    private static func firstIndex(of byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int {
        guard !range.isEmpty, let start = bytes.baseAddress.map({ UnsafeRawPointer($0) + range.lowerBound }),
              let found = memchr(start, Int32(byte), range.count) else { return range.upperBound }
        return range.lowerBound + start.distance(to: UnsafeRawPointer(found))
    }

    func string(_ range: Range<Int>) -> String {
        raw.withUnsafeBufferPointer { bytes in
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
    }

    /// Calls `body` with the raw path bytes.
    func withRawPath<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try raw.withUnsafeBufferPointer { bytes in
            try body(UnsafeBufferPointer(rebasing: bytes[pathRange]))
        }
    }
}

/// A range of head bytes in 8 bytes (heads are at most a few tens of kilobytes).
struct HeadSpan: Hashable {
    let start: UInt32
    let end: UInt32

    init(_ range: Range<Int>) {
        start = UInt32(truncatingIfNeeded: range.lowerBound)
        end = UInt32(truncatingIfNeeded: range.upperBound)
    }

    var range: Range<Int> { Int(start)..<Int(end) }
}

/// The parts of a request-target (RFC 9112 §3.2) as ranges into the head bytes.
struct HTTPRequestTarget {
    var targetRange: Range<Int>
    var pathRange: Range<Int>
    var queryRange: Range<Int>?

    /// Before the request line is parsed.
    static let none = HTTPRequestTarget(targetRange: 0..<0, pathRange: 0..<0, queryRange: nil)

    /// Parses `target` (exactly the request-target's bytes); the ranges are shifted by `offset`,
    /// the target's position in the head bytes.
    static func parse(_ target: UnsafeBufferPointer<UInt8>, at offset: Int) throws(HTTPParserError) -> HTTPRequestTarget {
        var parsed = try parse(target, range: 0..<target.count)
        guard offset != 0 else { return parsed }
        parsed.targetRange = (parsed.targetRange.lowerBound + offset)..<(parsed.targetRange.upperBound + offset)
        parsed.pathRange = (parsed.pathRange.lowerBound + offset)..<(parsed.pathRange.upperBound + offset)
        if let query = parsed.queryRange { parsed.queryRange = (query.lowerBound + offset)..<(query.upperBound + offset) }
        return parsed
    }

    /// Parses origin-form (`/path?query`), absolute-form (`http://host/path?query`) or
    /// asterisk-form (`*`). A `#fragment` is ignored. Authority-form belongs to CONNECT, which
    /// Parley does not implement, so it is refused.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>) throws(HTTPParserError) -> HTTPRequestTarget {
        var end = range.lowerBound
        while end < range.upperBound, bytes[end] != .hash { end += 1 }
        var pathStart = range.lowerBound
        let first = bytes[range.lowerBound]
        if first == .asterisk {
            guard range.count == 1 else { throw .invalidTarget }
            return HTTPRequestTarget(targetRange: range, pathRange: range, queryRange: nil)
        }
        if first != .slash {
            pathStart = try authorityEnd(bytes, from: range.lowerBound, to: end)
        }
        var pathEnd = pathStart
        while pathEnd < end, bytes[pathEnd] != .questionMark { pathEnd += 1 }
        let queryRange: Range<Int>? = pathEnd < end ? (pathEnd + 1)..<end : nil
        // The path must decode (`HTTPRequestHead.path` decodes it when asked); without `%` it does.
        let rawPath = UnsafeBufferPointer(rebasing: bytes[pathStart..<pathEnd])
        if rawPath.contains(.percent), PercentDecoding.decodePath(rawPath) == nil { throw .invalidTarget }
        return HTTPRequestTarget(targetRange: range, pathRange: pathStart..<pathEnd, queryRange: queryRange)
    }

    /// For absolute-form: checks `http://` or `https://` (any case) and returns where the path starts.
    private static func authorityEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) throws(HTTPParserError) -> Int {
        var index = start
        while index < end, bytes[index] != .colon { index += 1 }
        let scheme = UnsafeBufferPointer(rebasing: bytes[start..<index])
        guard HTTPCharacterClass.equalsCaseInsensitive(scheme, "http") || HTTPCharacterClass.equalsCaseInsensitive(scheme, "https"),
              index + 2 < end, bytes[index + 1] == .slash, bytes[index + 2] == .slash else {
            throw .invalidTarget
        }
        index += 3
        let authorityStart = index
        while index < end, bytes[index] != .slash, bytes[index] != .questionMark { index += 1 }
        guard index > authorityStart else { throw .invalidTarget }
        return index
    }
}
