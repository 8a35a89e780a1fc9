/// The status line and header fields of a response.
public struct HTTPResponseHead: Sendable {
    public var version: HTTPVersion
    public var status: HTTPStatus
    public var headers: HTTPHeaders

    public init(version: HTTPVersion = .http1_1, status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders()) {
        self.version = version
        self.status = status
        self.headers = headers
    }
}

/// An incremental HTTP/1.1 response parser (sans-I/O): bytes in with `append`, events out with
/// `next`, the end of the stream with `finish`.
///
/// Framing follows RFC 9112 §6.3: no body for HEAD, 1xx, 204 and 304; chunked when it is the
/// final transfer coding; else Content-Length; else the body runs until the connection closes.
/// Interim 1xx responses (other than 101) are skipped. Every part is bounded by `Limits`.
public struct HTTPResponseParser: Sendable {
    /// Bounds on what a response may use.
    public struct Limits: Sendable {
        /// Status line plus header lines (and, separately, the trailer section).
        public var maxHeadBytes: Int
        public var maxHeaderCount: Int
        /// Body bytes after transfer decoding.
        public var maxBodyBytes: Int
        /// One chunk-size line, extensions included.
        public var maxChunkLineBytes: Int

        public init(maxHeadBytes: Int = 16 * 1024, maxHeaderCount: Int = 100, maxBodyBytes: Int = 1 << 20, maxChunkLineBytes: Int = 1024) {
            self.maxHeadBytes = maxHeadBytes
            self.maxHeaderCount = maxHeaderCount
            self.maxBodyBytes = maxBodyBytes
            self.maxChunkLineBytes = maxChunkLineBytes
        }
    }

    /// What the parser found, in order: one `head`, any number of `body` parts, one `end`.
    public enum Event: Sendable {
        case head(HTTPResponseHead)
        case body([UInt8])
        case end
    }

    private enum State: Sendable, Equatable {
        /// No request is outstanding: bytes are unexpected.
        case idle
        case head
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        /// `end` was returned; `startResponse` begins the next one.
        case complete
    }

    public let limits: Limits
    private var state = State.idle
    private var buffer: [UInt8] = []
    private var position = 0
    private var bodyBytes = 0
    private var trailerBytes = 0
    private var bodyless = false
    private var receivedAny = false
    /// Whether the connection may carry another request after this response (known after `head`).
    public private(set) var keepAlive = false

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Whether `end` was returned for the current response.
    public var isComplete: Bool { state == .complete }

    /// Whether bytes are buffered that no event consumed yet.
    public var hasBufferedBytes: Bool { position < buffer.count }

    /// Expects the response to a request with `method` (HEAD responses have no body).
    public mutating func startResponse(to method: HTTPMethod) {
        state = .head
        bodyless = method == .head
        bodyBytes = 0
        trailerBytes = 0
        receivedAny = position < buffer.count
        keepAlive = false
    }

    /// Removes and returns the bytes buffered past the current response (after a `101`, the
    /// first bytes of the protocol the connection switched to).
    public mutating func takeBufferedBytes() -> [UInt8] {
        let rest = Array(buffer[position...])
        buffer.removeAll()
        position = 0
        return rest
    }

    /// Adds bytes read from the connection.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        } else if position > 4096 && position * 2 > buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(contentsOf: bytes)
        receivedAny = true
    }

    /// Adds bytes read from the connection.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next event from the buffered bytes, or nil when more bytes are needed.
    public mutating func next() throws(HTTPResponseParserError) -> Event? {
        while true {
            switch state {
            case .idle:
                if hasBufferedBytes { throw .unexpectedData }
                return nil
            case .complete:
                return nil
            case .head:
                guard let head = try parseHead() else { return nil }
                if let event = head { return event }
            case .fixedBody(let remaining):
                if remaining == 0 {
                    state = .complete
                    return .end
                }
                guard hasBufferedBytes else { return nil }
                let take = min(remaining, buffer.count - position)
                let part = Array(buffer[position..<(position + take)])
                position += take
                state = .fixedBody(remaining: remaining - take)
                return .body(part)
            case .untilClose:
                guard hasBufferedBytes else { return nil }
                let take = buffer.count - position
                bodyBytes += take
                if bodyBytes > limits.maxBodyBytes { throw .bodyTooLarge }
                let part = Array(buffer[position...])
                position = buffer.count
                return .body(part)
            case .chunkSize:
                guard let size = try parseChunkSize() else { return nil }
                if size == 0 {
                    state = .trailers
                } else {
                    bodyBytes += size
                    if bodyBytes > limits.maxBodyBytes { throw .bodyTooLarge }
                    state = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                guard hasBufferedBytes else { return nil }
                let take = min(remaining, buffer.count - position)
                let part = Array(buffer[position..<(position + take)])
                position += take
                state = take == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - take)
                return .body(part)
            case .chunkDataEnd:
                guard let ended = try consumeLineEnd(error: .invalidChunkTerminator) else { return nil }
                _ = ended
                state = .chunkSize
            case .trailers:
                guard let line = try takeLine(limit: limits.maxHeadBytes - trailerBytes, error: .invalidTrailer) else { return nil }
                trailerBytes += line.count + 2
                if line.isEmpty {
                    state = .complete
                    return .end
                }
                guard line.first != .space && line.first != .tab, line.contains(.colon) else { throw .invalidTrailer }
            }
        }
    }

    /// The connection reached end of stream: the end of a body that runs until close, else an
    /// error when a response was under way (nil when idle or complete).
    public mutating func finish() throws(HTTPResponseParserError) -> Event? {
        switch state {
        case .idle, .complete:
            return nil
        case .untilClose:
            state = .complete
            return .end
        case .head where !receivedAny:
            throw .closedBeforeResponse
        default:
            throw .truncatedResponse
        }
    }

    // MARK: Head

    /// Parses a complete head if buffered: `nil` = need more bytes; `.some(nil)` = an interim
    /// response was skipped; `.some(event)` = the head.
    private mutating func parseHead() throws(HTTPResponseParserError) -> Event?? {
        guard let end = headEnd() else {
            if buffer.count - position > limits.maxHeadBytes { throw .headTooLarge }
            return nil
        }
        if end.total > limits.maxHeadBytes { throw .headTooLarge }
        let start = position
        position += end.total
        let head = try buffer.withUnsafeBufferPointer { all throws(HTTPResponseParserError) -> HTTPResponseHead in
            try Self.parseHead(UnsafeBufferPointer(rebasing: all[start..<(start + end.content)]), maxHeaderCount: limits.maxHeaderCount)
        }
        let code = head.status.code
        if code >= 100 && code < 200 && code != 101 {
            // Interim response (100 Continue, 103 Early Hints): the final one follows.
            return .some(nil)
        }
        keepAlive = Self.isPersistent(head)
        if bodyless || code < 200 || code == 204 || code == 304 {
            // No body: `end` follows the head.
            state = .fixedBody(remaining: 0)
            if code == 101 { keepAlive = false }
            return .some(.head(head))
        }
        let framing = try Self.framing(of: head.headers)
        switch framing {
        case .chunked(let withLength):
            if withLength { keepAlive = false }
            state = .chunkSize
        case .length(let length):
            if length > limits.maxBodyBytes { throw .bodyTooLarge }
            state = .fixedBody(remaining: length)
        case .untilClose:
            keepAlive = false
            state = .untilClose
        }
        return .some(.head(head))
    }

    /// Length of the head's content (without the blank line) and with it, once the blank line
    /// is buffered. Lines may end with CRLF or a bare LF.
    private func headEnd() -> (content: Int, total: Int)? {
        var index = position
        var lineStart = position
        while index < buffer.count {
            if buffer[index] == .lf {
                var contentEnd = index
                if contentEnd > lineStart && buffer[contentEnd - 1] == .cr { contentEnd -= 1 }
                if contentEnd == lineStart && lineStart > position {
                    return (lineStart - position, index + 1 - position)
                }
                lineStart = index + 1
            }
            index += 1
        }
        return nil
    }

    private static func parseHead(_ bytes: UnsafeBufferPointer<UInt8>, maxHeaderCount: Int) throws(HTTPResponseParserError) -> HTTPResponseHead {
        var lines: [Range<Int>] = []
        var lineStart = 0
        for index in 0..<bytes.count where bytes[index] == .lf {
            var end = index
            if end > lineStart && bytes[end - 1] == .cr { end -= 1 }
            lines.append(lineStart..<end)
            lineStart = index + 1
        }
        if lineStart < bytes.count { lines.append(lineStart..<bytes.count) }
        guard let statusLine = lines.first else { throw .invalidStatusLine }
        let (version, status) = try parseStatusLine(UnsafeBufferPointer(rebasing: bytes[statusLine]))
        guard lines.count - 1 <= maxHeaderCount else { throw .tooManyHeaders }
        var storage: [UInt8] = []
        storage.reserveCapacity(bytes.count)
        var fields: [HTTPHeaders.Field] = []
        fields.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() {
            let text = UnsafeBufferPointer(rebasing: bytes[line])
            guard let first = text.first else { throw .invalidHeaderName }
            if HTTPCharacterClass.isWhitespace(first) { throw .obsoleteLineFolding }
            guard let colon = text.firstIndex(of: .colon), colon > 0 else { throw .invalidHeaderName }
            for byte in text[0..<colon] where !HTTPCharacterClass.isToken(byte) { throw .invalidHeaderName }
            var lower = colon + 1
            var upper = text.count
            while lower < upper && HTTPCharacterClass.isWhitespace(text[lower]) { lower += 1 }
            while upper > lower && HTTPCharacterClass.isWhitespace(text[upper - 1]) { upper -= 1 }
            for byte in text[lower..<upper] where !HTTPCharacterClass.isFieldValue(byte) { throw .invalidHeaderValue }
            let nameStart = storage.count
            storage.append(contentsOf: text[0..<colon])
            let valueStart = storage.count
            storage.append(contentsOf: text[lower..<upper])
            fields.append(HTTPHeaders.Field(nameStart: UInt32(nameStart), nameLength: UInt32(colon),
                                            valueStart: UInt32(valueStart), valueLength: UInt32(upper - lower)))
        }
        return HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(storage: storage, fields: fields))
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason]`.
    private static func parseStatusLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPResponseParserError) -> (HTTPVersion, HTTPStatus) {
        guard line.count >= 12, line[0] == 0x48, line[1] == 0x54, line[2] == 0x54, line[3] == 0x50, line[4] == .slash,
              line[6] == 0x2E, line[8] == .space
        else { throw .invalidStatusLine }
        guard line[5] == 0x31, line[7] == 0x30 || line[7] == 0x31 else {
            if (0x30...0x39).contains(line[5]) && (0x30...0x39).contains(line[7]) { throw .unsupportedVersion }
            throw .invalidStatusLine
        }
        var code = 0
        for index in 9..<12 {
            let byte = line[index]
            guard (0x30...0x39).contains(byte) else { throw .invalidStatusLine }
            code = code * 10 + Int(byte - 0x30)
        }
        guard code >= 100 else { throw .invalidStatusLine }
        if line.count > 12 {
            guard line[12] == .space else { throw .invalidStatusLine }
            for byte in line[13...] where !HTTPCharacterClass.isFieldValue(byte) { throw .invalidStatusLine }
        }
        return (HTTPVersion(major: 1, minor: Int(line[7] - 0x30)), HTTPStatus(code))
    }

    private static func isPersistent(_ head: HTTPResponseHead) -> Bool {
        if head.headers.containsToken("close", in: "connection") { return false }
        if head.version == .http1_0 { return head.headers.containsToken("keep-alive", in: "connection") }
        return true
    }

    private enum Framing {
        /// `withLength`: Content-Length was sent too (ignored; the connection is not reused).
        case chunked(withLength: Bool)
        case length(Int)
        case untilClose
    }

    private static func framing(of headers: HTTPHeaders) throws(HTTPResponseParserError) -> Framing {
        var transferCodings: [String] = []
        var length: Int?
        var hasLength = false
        for index in 0..<headers.count {
            if headers.nameIs(index, "transfer-encoding") {
                headers.withValueBytes(at: index) { value in
                    HTTPHeaders.forEachListElement(value) { element in
                        transferCodings.append(String(decoding: element, as: UTF8.self).lowercased())
                    }
                }
            } else if headers.nameIs(index, "content-length") {
                hasLength = true
                var valid = true
                headers.withValueBytes(at: index) { value in
                    HTTPHeaders.forEachListElement(value) { element in
                        guard valid else { return }
                        guard let parsed = decimal(element) else {
                            valid = false
                            return
                        }
                        if let length, length != parsed { valid = false }
                        length = parsed
                    }
                }
                guard valid else { throw .invalidContentLength }
            }
        }
        if !transferCodings.isEmpty {
            let chunkedCount = transferCodings.count { $0 == "chunked" }
            if transferCodings.last == "chunked" {
                guard chunkedCount == 1 else { throw .invalidTransferEncoding }
                return .chunked(withLength: hasLength)
            }
            guard chunkedCount == 0 else { throw .invalidTransferEncoding }
            return .untilClose
        }
        if hasLength {
            guard let length else { throw .invalidContentLength }
            return .length(length)
        }
        return .untilClose
    }

    private static func decimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard (0x30...0x39).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    // MARK: Chunks

    /// A chunk-size line if buffered: hex size, optional extensions (skipped), line end.
    private mutating func parseChunkSize() throws(HTTPResponseParserError) -> Int? {
        guard let line = try takeLine(limit: limits.maxChunkLineBytes, error: .invalidChunkSize) else { return nil }
        var size = 0
        var digits = 0
        var index = 0
        while index < line.count, let value = HTTPCharacterClass.hexValue(line[index]) {
            guard digits < 15 else { throw .invalidChunkSize }
            size = size << 4 | Int(value)
            digits += 1
            index += 1
        }
        guard digits > 0 else { throw .invalidChunkSize }
        while index < line.count && HTTPCharacterClass.isWhitespace(line[index]) { index += 1 }
        guard index == line.count || line[index] == .semicolon else { throw .invalidChunkSize }
        for byte in line[index...] where !HTTPCharacterClass.isFieldValue(byte) { throw .invalidChunkSize }
        return size
    }

    /// A whole line (without its CRLF or LF) if buffered within `limit` bytes.
    private mutating func takeLine(limit: Int, error: HTTPResponseParserError) throws(HTTPResponseParserError) -> [UInt8]? {
        var index = position
        while index < buffer.count {
            if buffer[index] == .lf {
                var end = index
                if end > position && buffer[end - 1] == .cr { end -= 1 }
                guard end - position <= limit else { throw error }
                let line = Array(buffer[position..<end])
                position = index + 1
                return line
            }
            if buffer[index] == .cr, index + 1 < buffer.count, buffer[index + 1] != .lf { throw error }
            index += 1
        }
        if buffer.count - position > limit { throw error }
        return nil
    }

    /// Consumes the CRLF (or LF) after chunk data.
    private mutating func consumeLineEnd(error: HTTPResponseParserError) throws(HTTPResponseParserError) -> Bool? {
        guard hasBufferedBytes else { return nil }
        if buffer[position] == .lf {
            position += 1
            return true
        }
        guard buffer[position] == .cr else { throw error }
        guard position + 1 < buffer.count else { return nil }
        guard buffer[position + 1] == .lf else { throw error }
        position += 2
        return true
    }
}
