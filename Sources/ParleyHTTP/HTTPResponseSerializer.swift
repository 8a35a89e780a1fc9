/// Writes response heads (and small bodies) into a reusable byte buffer.
///
/// The server owns framing: it writes `Date` (from the loop's cache unless the handler set one),
/// `Content-Length` from the body and `Connection`, and skips handler-set `Content-Length`,
/// `Transfer-Encoding` and `Connection` fields. A `101 Switching Protocols` response keeps the
/// handler's `Connection` and `Upgrade` fields and gets no `Content-Length`.
public enum HTTPResponseSerializer {
    /// Appends the status line and header section of `response` to `buffer`.
    ///
    /// - Parameters:
    ///   - keepAlive: whether the connection stays open (`Connection: keep-alive` or `close`).
    ///   - headRequest: the request was HEAD: `Content-Length` describes the body a GET would get;
    ///     a handler's own `Content-Length` is kept when the body is empty.
    ///   - dateHeaderLine: `Date: …\r\n` from an `HTTPDateCache`.
    ///   A stream of unknown length gets `Transfer-Encoding: chunked`.
    public static func writeHead(
        _ response: HTTPResponse, keepAlive: Bool, headRequest: Bool, dateHeaderLine: [UInt8], into buffer: inout [UInt8]
    ) {
        var output = ArrayOutput(bytes: buffer)
        buffer = []
        writeHead(response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: dateHeaderLine, into: &output)
        buffer = output.bytes
    }

    /// `writeHead` into any byte sink (the server writes into a loop's scratch memory); `fields`,
    /// when given, are the response's header fields serialized earlier.
    @inline(__always)
    static func writeHead<Output: ResponseOutput>(
        _ response: HTTPResponse, keepAlive: Bool, headRequest: Bool, dateHeaderLine: [UInt8], fields: SerializedFields? = nil,
        closeDelimited: Bool = false, into output: inout Output
    ) {
        let status = response.status
        let switching = status.code == 101
        appendStatusLine(status, into: &output)
        let hasDate: Bool
        let handlerContentLength: Int?
        if let fields {
            hasDate = fields.hasDate
            handlerContentLength = fields.contentLength
        } else {
            (hasDate, handlerContentLength) = framingFacts(response.headers, headRequest: headRequest)
        }
        if !hasDate { dateHeaderLine.withUnsafeBytes { output.append($0) } }
        if status.allowsContent {
            let length: Int?
            switch response.body {
            case .bytes(let body): length = headRequest && body.isEmpty ? (handlerContentLength ?? 0) : body.count
            case .stream(let streamLength, _): length = streamLength
            case .file(let region, _): length = region.range.count
            }
            if let length {
                output.append("Content-Length: ")
                appendDecimal(length, into: &output)
                output.append("\r\n")
            } else if !closeDelimited {
                output.append("Transfer-Encoding: chunked\r\n")
            }
        }
        if !switching {
            output.append(keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n")
        }
        if let fields {
            fields.lines.withUnsafeBytes { output.append($0) }
        } else {
            appendFieldLines(response.headers, switching: switching, into: &output)
        }
        output.append("\r\n")
    }

    /// Whether the handler set `Date`, and (only asked for HEAD) the first valid `Content-Length` it set.
    @inline(__always)
    static func framingFacts(_ headers: HTTPHeaders, headRequest: Bool) -> (hasDate: Bool, contentLength: Int?) {
        var contentLength: Int?
        var hasDate = false
        for index in 0..<headers.count {
            switch headers.fields[index].nameLength {
            case 4:
                if headers.nameIs(index, "date") { hasDate = true }
            case 14:
                if headRequest, contentLength == nil, headers.nameIs(index, "content-length") {
                    contentLength = headers.withValueBytes(at: index) { Int(decimal: $0) }
                }
            default:
                break
            }
        }
        return (hasDate, contentLength)
    }

    /// The handler's field lines, without the framing fields the server writes itself.
    @inline(__always)
    static func appendFieldLines<Output: ResponseOutput>(_ headers: HTTPHeaders, switching: Bool, into output: inout Output) {
        headers.storage.withUnsafeBytes { storage in
            for (index, field) in headers.fields.enumerated() {
                switch field.nameLength {
                case 14: if headers.nameIs(index, "content-length") { continue }
                case 17: if headers.nameIs(index, "transfer-encoding") { continue }
                case 10: if !switching, headers.nameIs(index, "connection") { continue }
                default: break
                }
                let nameStart = Int(field.nameStart)
                let valueStart = Int(field.valueStart)
                output.append(UnsafeRawBufferPointer(rebasing: storage[nameStart..<(nameStart + Int(field.nameLength))]))
                output.append(": ")
                output.append(UnsafeRawBufferPointer(rebasing: storage[valueStart..<(valueStart + Int(field.valueLength))]))
                output.append("\r\n")
            }
        }
    }

    /// Whether the body bytes go on the wire after the head.
    public static func sendsBody(_ response: HTTPResponse, headRequest: Bool) -> Bool {
        !headRequest && response.status.allowsContent && response.body.length != 0
    }

    /// `bytes` as one chunk of a chunked body (`size CRLF bytes CRLF`); empty for no bytes.
    public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        guard !bytes.isEmpty else { return [] }
        var output = ArrayOutput(bytes: [])
        output.bytes.reserveCapacity(bytes.count + 12)
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var size = bytes.count
        var hex: [UInt8] = []
        while size > 0 {
            hex.append(digits[size & 15])
            size >>= 4
        }
        output.bytes.append(contentsOf: hex.reversed())
        output.append("\r\n")
        output.bytes.append(contentsOf: bytes)
        output.append("\r\n")
        return output.bytes
    }

    /// The last chunk of a chunked body, with no trailers.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// `HTTP/1.1 100 Continue\r\n\r\n`.
    public static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    @inline(__always)
    static func appendStatusLine<Output: ResponseOutput>(_ status: HTTPStatus, into output: inout Output) {
        switch status.code {
        case 200: output.append("HTTP/1.1 200 OK\r\n")
        case 201: output.append("HTTP/1.1 201 Created\r\n")
        case 204: output.append("HTTP/1.1 204 No Content\r\n")
        case 400: output.append("HTTP/1.1 400 Bad Request\r\n")
        case 404: output.append("HTTP/1.1 404 Not Found\r\n")
        default:
            output.append("HTTP/1.1 ")
            appendDecimal(status.code, into: &output)
            output.append(" ")
            var reason = status.reasonPhrase
            reason.withUTF8 { output.append(UnsafeRawBufferPointer($0)) }
            output.append("\r\n")
        }
    }

    static func appendDecimal<Output: ResponseOutput>(_ value: Int, into output: inout Output) {
        precondition(value >= 0, "negative decimal")
        if value < 100_000_000 {
            // Up to eight digits (every body length in practice) in one word, first digit lowest.
            var rest = UInt64(value)
            var word: UInt64 = 0
            var count = 0
            repeat {
                word = word << 8 | (0x30 + rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            var stored = word.littleEndian
            withUnsafeBytes(of: &stored) { output.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { scratch in
            repeat {
                scratch[19 - count] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            output.append(UnsafeRawBufferPointer(rebasing: scratch[(20 - count)...]))
        }
    }
}

/// Where the serializer writes bytes.
protocol ResponseOutput {
    mutating func append(_ bytes: UnsafeRawBufferPointer)
}

extension ResponseOutput {
    @inline(__always)
    mutating func append(_ literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}

/// An array being appended to.
struct ArrayOutput: ResponseOutput {
    var bytes: [UInt8]

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        self.bytes.append(contentsOf: bytes)
    }
}

/// Fixed memory filled front to back; what does not fit is dropped and `overflowed` set, so the
/// caller falls back to an `ArrayOutput`.
struct ScratchOutput: ResponseOutput {
    let start: UnsafeMutableRawPointer
    let capacity: Int
    private(set) var count = 0
    private(set) var overflowed = false

    init(start: UnsafeMutableRawPointer, capacity: Int) {
        self.start = start
        self.capacity = capacity
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= capacity - count else {
            overflowed = true
            return
        }
        if let source = bytes.baseAddress { (start + count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    /// The bytes written.
    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: count) }
}

extension Int {
    /// Parses ASCII decimal digits only (no sign, no whitespace); nil on anything else or overflow.
    init?(decimal bytes: UnsafeBufferPointer<UInt8>) {
        guard !bytes.isEmpty else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(Int(byte - 0x30))
            if overflow || carry { return nil }
            value = sum
        }
        self = value
    }
}

/// What `writeHead` takes from a response's header fields, serialized once: the server keeps the
/// last fields it saw again (a handler's shared static fields) and copies their lines instead of
/// rewriting them for every response.
final class SerializedFields {
    /// The fields these are made of, kept so that their storage stays alive (see `serves`).
    let headers: HTTPHeaders
    let switching: Bool
    let hasDate: Bool
    /// The first valid `Content-Length` the handler set.
    let contentLength: Int?
    /// Whether the fields ask to close the connection (`Connection: close`).
    let asksToClose: Bool
    /// The field lines written after the server's own lines.
    let lines: [UInt8]

    init(_ headers: HTTPHeaders, switching: Bool) {
        self.headers = headers
        self.switching = switching
        (hasDate, contentLength) = HTTPResponseSerializer.framingFacts(headers, headRequest: true)
        asksToClose = headers.containsToken("close", inField: "connection")
        var output = ArrayOutput(bytes: [])
        HTTPResponseSerializer.appendFieldLines(headers, switching: switching, into: &output)
        lines = output.bytes
    }

    /// Whether these are the serialized form of `headers` for a response that does (not) switch protocols.
    func serves(_ headers: HTTPHeaders, switching: Bool) -> Bool {
        switching == self.switching && self.headers.sharesStorage(with: headers)
    }
}
