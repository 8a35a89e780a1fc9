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
    public static func writeHead(
        _ response: HTTPResponse, keepAlive: Bool, headRequest: Bool, dateHeaderLine: [UInt8], into buffer: inout [UInt8]
    ) {
        let status = response.status
        let headers = response.headers
        let switching = status.code == 101
        appendStatusLine(status, into: &buffer)
        var handlerContentLength: Int?
        var hasDate = false
        for index in 0..<headers.count {
            if headers.nameIs(index, "date") { hasDate = true }
            if headRequest, handlerContentLength == nil, headers.nameIs(index, "content-length") {
                handlerContentLength = headers.withValueBytes(at: index) { Int(decimal: $0) }
            }
        }
        if !hasDate { buffer.append(contentsOf: dateHeaderLine) }
        if status.allowsContent {
            let length = headRequest && response.body.isEmpty ? (handlerContentLength ?? 0) : response.body.count
            append("Content-Length: ", into: &buffer)
            appendDecimal(length, into: &buffer)
            buffer.append(contentsOf: [UInt8.cr, .lf])
        }
        if !switching {
            append(keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n", into: &buffer)
        }
        headers.storage.withUnsafeBufferPointer { storage in
            for (index, field) in headers.fields.enumerated() {
                if headers.nameIs(index, "content-length") || headers.nameIs(index, "transfer-encoding") { continue }
                if !switching, headers.nameIs(index, "connection") { continue }
                let nameStart = Int(field.nameStart)
                let valueStart = Int(field.valueStart)
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: storage[nameStart..<(nameStart + Int(field.nameLength))]))
                buffer.append(contentsOf: [UInt8.colon, .space])
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: storage[valueStart..<(valueStart + Int(field.valueLength))]))
                buffer.append(contentsOf: [UInt8.cr, .lf])
            }
        }
        buffer.append(contentsOf: [UInt8.cr, .lf])
    }

    /// Whether the body bytes go on the wire after the head.
    public static func sendsBody(_ response: HTTPResponse, headRequest: Bool) -> Bool {
        !headRequest && response.status.allowsContent && !response.body.isEmpty
    }

    /// `HTTP/1.1 100 Continue\r\n\r\n`.
    public static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    static func appendStatusLine(_ status: HTTPStatus, into buffer: inout [UInt8]) {
        switch status.code {
        case 200: append("HTTP/1.1 200 OK\r\n", into: &buffer)
        case 201: append("HTTP/1.1 201 Created\r\n", into: &buffer)
        case 204: append("HTTP/1.1 204 No Content\r\n", into: &buffer)
        case 400: append("HTTP/1.1 400 Bad Request\r\n", into: &buffer)
        case 404: append("HTTP/1.1 404 Not Found\r\n", into: &buffer)
        default:
            append("HTTP/1.1 ", into: &buffer)
            appendDecimal(status.code, into: &buffer)
            buffer.append(.space)
            buffer.append(contentsOf: status.reasonPhrase.utf8)
            buffer.append(contentsOf: [UInt8.cr, .lf])
        }
    }

    @inline(__always)
    static func append(_ literal: StaticString, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func appendDecimal(_ value: Int, into buffer: inout [UInt8]) {
        precondition(value >= 0, "negative decimal")
        if value < 10 {
            buffer.append(UInt8(0x30 + value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { scratch in
            while rest > 0 {
                scratch[19 - count] = UInt8(0x30 + rest % 10)
                rest /= 10
                count += 1
            }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[(20 - count)...]))
        }
    }
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
