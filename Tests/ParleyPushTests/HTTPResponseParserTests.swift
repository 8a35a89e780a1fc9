import XCTest
@testable import ParleyHTTP

final class HTTPResponseParserTests: XCTestCase {
    /// Feeds `text` in pieces of `step` bytes (0 = all at once) and collects head, body and end.
    private func parse(_ text: String, method: HTTPMethod = .get, step: Int = 0, limits: HTTPResponseParser.Limits = .init(),
                       eof: Bool = false) throws -> (head: HTTPResponseHead?, body: String, ended: Bool, keepAlive: Bool) {
        var parser = HTTPResponseParser(limits: limits)
        parser.startResponse(to: method)
        let bytes = Array(text.utf8)
        var head: HTTPResponseHead?
        var body: [UInt8] = []
        var ended = false
        func drain(_ parser: inout HTTPResponseParser) throws {
            while let event = try parser.next() {
                switch event {
                case .head(let h): head = h
                case .body(let part): body += part
                case .end: ended = true
                }
            }
        }
        if step == 0 {
            parser.append(bytes)
            try drain(&parser)
        } else {
            var index = 0
            while index < bytes.count {
                parser.append(Array(bytes[index..<min(bytes.count, index + step)]))
                try drain(&parser)
                index += step
            }
        }
        if eof, let event = try parser.finish(), case .end = event { ended = true }
        return (head, String(decoding: body, as: UTF8.self), ended, parser.keepAlive)
    }

    private func expectError(_ text: String, _ expected: HTTPResponseParserError, method: HTTPMethod = .get,
                             limits: HTTPResponseParser.Limits = .init(), eof: Bool = false, line: UInt = #line) {
        XCTAssertThrowsError(try parse(text, method: method, limits: limits, eof: eof), line: line) { error in
            XCTAssertEqual(error as? HTTPResponseParserError, expected, line: line)
        }
    }

    func testContentLengthResponseInEveryPieceSize() throws {
        let text = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\nX-Empty:\r\n\r\n{\"ok\":true}"
        for step in [0, 1, 2, 3, 7, 64] {
            let result = try parse(text, step: step)
            XCTAssertEqual(result.head?.status.code, 201)
            XCTAssertEqual(result.head?.headers["content-type"], "application/json")
            XCTAssertEqual(result.head?.headers["x-empty"], "")
            XCTAssertEqual(result.body, "{\"ok\":true}")
            XCTAssertTrue(result.ended)
            XCTAssertTrue(result.keepAlive)
        }
    }

    func testChunkedBodyWithExtensionsAndTrailers() throws {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" +
            "5;name=value\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: yes\r\n\r\n"
        for step in [0, 1, 4, 9] {
            let result = try parse(text, step: step)
            XCTAssertEqual(result.body, "hello world!")
            XCTAssertTrue(result.ended)
            XCTAssertTrue(result.keepAlive)
        }
    }

    func testBareLineFeedsAreAccepted() throws {
        let result = try parse("HTTP/1.1 200 OK\nContent-Length: 2\n\nhi")
        XCTAssertEqual(result.body, "hi")
        XCTAssertTrue(result.ended)
    }

    func testResponsesWithoutBody() throws {
        let head = try parse("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n", method: .head)
        XCTAssertTrue(head.ended)
        XCTAssertEqual(head.body, "")
        for status in [204, 304] {
            let result = try parse("HTTP/1.1 \(status) X\r\nContent-Length: 3\r\n\r\n")
            XCTAssertTrue(result.ended)
            XCTAssertEqual(result.head?.status.code, status)
        }
    }

    func testInterimResponsesAreSkipped() throws {
        let result = try parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        XCTAssertEqual(result.head?.status.code, 200)
        XCTAssertEqual(result.body, "ok")
    }

    func testBodyUntilCloseEndsAtEndOfStream() throws {
        let open = try parse("HTTP/1.1 200 OK\r\n\r\npartial", step: 3)
        XCTAssertFalse(open.ended)
        XCTAssertFalse(open.keepAlive)
        let closed = try parse("HTTP/1.1 200 OK\r\n\r\nall of it", eof: true)
        XCTAssertTrue(closed.ended)
        XCTAssertEqual(closed.body, "all of it")
        // A non-chunked transfer coding also runs until close.
        let gzip = try parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz", eof: true)
        XCTAssertEqual(gzip.body, "xyz")
        XCTAssertFalse(gzip.keepAlive)
    }

    func testPersistence() throws {
        XCTAssertFalse(try parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keepAlive)
        XCTAssertFalse(try parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keepAlive)
        XCTAssertTrue(try parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keepAlive)
        // Transfer-Encoding with Content-Length: chunked wins, and the connection is not reused.
        let both = try parse("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        XCTAssertEqual(both.body, "ok")
        XCTAssertFalse(both.keepAlive)
    }

    func testTwoResponsesOnOneParser() throws {
        var parser = HTTPResponseParser()
        for body in ["first", "second"] {
            parser.startResponse(to: .post)
            parser.append(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8))
            var collected: [UInt8] = []
            var ended = false
            while let event = try parser.next() {
                if case .body(let part) = event { collected += part }
                if case .end = event { ended = true }
            }
            XCTAssertTrue(ended)
            XCTAssertEqual(String(decoding: collected, as: UTF8.self), body)
            XCTAssertFalse(parser.hasBufferedBytes)
        }
    }

    func testMalformedResponsesAreRefused() {
        expectError("HTTX/1.1 200 OK\r\n\r\n", .invalidStatusLine)
        expectError("HTTP/1.1 2000 OK\r\n\r\n", .invalidStatusLine)
        expectError("HTTP/1.1 20 OK\r\n\r\n", .invalidStatusLine)
        expectError("HTTP/2.0 200 OK\r\n\r\n", .unsupportedVersion)
        expectError("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", .invalidHeaderName)
        expectError("HTTP/1.1 200 OK\r\n: x\r\n\r\n", .invalidHeaderName)
        expectError("HTTP/1.1 200 OK\r\nA: b\u{01}c\r\n\r\n", .invalidHeaderValue)
        expectError("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", .obsoleteLineFolding)
        expectError("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", .invalidContentLength)
        expectError("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", .invalidContentLength)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .invalidTransferEncoding)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", .invalidTransferEncoding)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .invalidChunkSize)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n", .invalidChunkTerminator)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n bad\r\n\r\n", .invalidTrailer)
    }

    func testLimits() {
        var small = HTTPResponseParser.Limits()
        small.maxHeadBytes = 64
        expectError("HTTP/1.1 200 OK\r\nX: \(String(repeating: "a", count: 100))\r\n\r\n", .headTooLarge, limits: small)
        // Without the blank line yet, the buffered head alone passes the limit.
        expectError("HTTP/1.1 200 OK\r\nX: \(String(repeating: "a", count: 100))", .headTooLarge, limits: small)
        var few = HTTPResponseParser.Limits()
        few.maxHeaderCount = 2
        expectError("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", .tooManyHeaders, limits: few)
        var body = HTTPResponseParser.Limits()
        body.maxBodyBytes = 10
        expectError("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", .bodyTooLarge, limits: body)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n", .bodyTooLarge, limits: body)
        expectError("HTTP/1.1 200 OK\r\n\r\n\(String(repeating: "z", count: 11))", .bodyTooLarge, limits: body)
        var chunkLine = HTTPResponseParser.Limits()
        chunkLine.maxChunkLineBytes = 8
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;\(String(repeating: "e", count: 20))", .invalidChunkSize, limits: chunkLine)
        expectError("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdef0\r\n", .invalidChunkSize)
    }

    func testEndOfStream() throws {
        expectError("", .closedBeforeResponse, eof: true)
        expectError("HTTP/1.1 200 OK\r\nContent-Len", .truncatedResponse, eof: true)
        expectError("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", .truncatedResponse, eof: true)
        var idle = HTTPResponseParser()
        XCTAssertNil(try idle.finish())
        idle.append(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        XCTAssertThrowsError(try idle.next()) { XCTAssertEqual($0 as? HTTPResponseParserError, .unexpectedData) }
    }

    func testURLParsing() {
        let plain = HTTPClientURL("http://gorush:8088")
        XCTAssertEqual(plain?.host, "gorush")
        XCTAssertEqual(plain?.port, 8088)
        XCTAssertEqual(plain?.target, "/")
        let full = HTTPClientURL("HTTP://127.0.0.1/api/push?x=1#frag")
        XCTAssertEqual(full?.port, 80)
        XCTAssertEqual(full?.target, "/api/push?x=1")
        XCTAssertEqual(full?.authority, "127.0.0.1")
        let v6 = HTTPClientURL("http://[::1]:9000/a")
        XCTAssertEqual(v6?.host, "::1")
        XCTAssertEqual(v6?.authority, "[::1]:9000")
        XCTAssertEqual(HTTPClientURL("http://h?q")?.target, "/?q")
        let secure = HTTPClientURL("https://keys.example.com/jwks")
        XCTAssertEqual(secure?.isSecure, true)
        XCTAssertEqual(secure?.port, 443)
        XCTAssertEqual(secure?.authority, "keys.example.com")
        XCTAssertEqual(HTTPClientURL("https://h:8443")?.authority, "h:8443")
        XCTAssertEqual(secure?.description, "https://keys.example.com/jwks")
        for bad in ["ftp://x", "https://", "httpx://h", "http://", "http://:80", "http://h:0", "http://h:99999", "http://u@h", "http://h/a b", "http://[::1"] {
            XCTAssertNil(HTTPClientURL(bad), bad)
        }
    }

    func testRequestSerialization() {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", "999")
        headers.add("Host", "evil")
        let request = HTTPClientRequest(method: .post, url: HTTPClientURL("http://gw:8088/api/push")!, headers: headers, body: Array("{}".utf8))
        let text = String(decoding: request.serialized(userAgent: "parley"), as: UTF8.self)
        XCTAssertEqual(text, "POST /api/push HTTP/1.1\r\nHost: gw:8088\r\nUser-Agent: parley\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    }
}
