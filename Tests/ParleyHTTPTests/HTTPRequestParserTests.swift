import XCTest
@testable import ParleyHTTP

final class HTTPRequestParserTests: XCTestCase {
    /// Well-formed inputs covering every framing and head feature.
    static let validCorpus: [(name: String, text: String)] = [
        ("simple GET", "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("no headers", "GET / HTTP/1.1\r\n\r\n"),
        ("content-length body", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\nhello world"),
        ("zero content-length", "POST /echo HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
        ("leading zeros", "PUT /x HTTP/1.1\r\nContent-Length: 003\r\n\r\nabc"),
        ("chunked", "POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
        ("chunked hex sizes, extensions, trailers",
         "POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "A;name=value;flag\r\n0123456789\r\n"
            + "1;q=\"a \\\"quoted\\\" value\"\r\nx\r\n"
            + "000\r\nTrailer-One: 1\r\nTrailer-Two: two\r\n\r\n"),
        ("transfer-encoding case and whitespace", "POST /u HTTP/1.1\r\ntransfer-ENCODING:  Chunked \r\n\r\n1\r\na\r\n0\r\n\r\n"),
        ("pipelined mix",
         "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
            + "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nDELETE /d?x=1 HTTP/1.1\r\n\r\n"),
        ("empty lines between requests", "\r\n\r\nGET /a HTTP/1.1\r\n\r\n\r\nGET /b HTTP/1.1\r\n\r\n"),
        ("http/1.0 keep-alive", "GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n"),
        ("http/1.1 close", "GET /a HTTP/1.1\r\nConnection: close\r\n\r\n"),
        ("close wins over keep-alive", "GET /a HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n"),
        ("absolute-form", "GET http://example.com:8080/over/there?name=ferret#nose HTTP/1.1\r\nHost: example.com\r\n\r\n"),
        ("absolute-form without path", "GET HTTPS://example.com?x=1 HTTP/1.1\r\n\r\n"),
        ("asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("percent-encoded path and query", "GET /files/a%20b/%C3%A9t%C3%A9?q=caf%C3%A9+au+lait&empty=&flag HTTP/1.1\r\n\r\n"),
        ("header whitespace and obs-text", "GET / HTTP/1.1\r\nA:   spaced value \t \r\nB:\r\nC: D\u{00FC}sseldorf\r\nD:\t\r\n\r\n"),
        ("long names and values read a word at a time",
         "GET /parse/users/me/and/a/longer/path HTTP/1.1\r\nX-Parse-Application-Id: parley\r\n"
            + "X-Parse-Session-Token: r:0123456789abcdef0123456789abcdef\r\nX_Odd.Name~With^Rare|Tokens: v\r\n"
            + "Long-Value-With-Tab: abcdefgh\tijklmnop qrstuvwx \t  \r\nObs-Text-Value: caf\u{00E9} cr\u{00E8}me br\u{00FB}l\u{00E9}e\r\n"
            + "Trailing-Spaces-Across-Words: 12345678        \r\nContent-Length: 00000000000000000003\r\n\r\nabc"),
        ("long query read a word at a time",
         "GET /parse/users?where=%7B%22username%22%3A%2212345%22%7D&limit=1#frag HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        ("repeated fields", "GET / HTTP/1.1\r\nAccept: a\r\naccept: b\r\nCookie: x=1\r\nCookie: y=2\r\n\r\n"),
        ("expect 100-continue", "PUT /big HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\nbody"),
        ("expect on http/1.0 ignored", "PUT /big HTTP/1.0\r\nExpect: something\r\nContent-Length: 1\r\n\r\nb"),
        ("upgrade with leftover bytes",
         "GET /v1/socket HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\u{81}\u{05}hello"),
        ("upgrade header without connection token", "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET /next HTTP/1.1\r\n\r\n"),
        ("webdav and other methods", "PROPFIND /dav HTTP/1.1\r\n\r\nM-SEARCH * HTTP/1.1\r\n\r\nQUERY /q HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"),
        ("unfinished second request", "GET /a HTTP/1.1\r\n\r\nGET /b HT"),
        ("unfinished body", "POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345"),
    ]

    func testValidCorpusSplitAtEveryByteBoundaryYieldsTheSameEvents() {
        for (name, text) in Self.validCorpus {
            let bytes = [UInt8](http: text)
            let reference = ParserDriver.whole(bytes)
            XCTAssertFalse(reference.isEmpty, name)
            XCTAssertFalse(reference.contains { if case .error = $0 { true } else { false } }, "\(name): \(reference)")
            for split in 1..<bytes.count {
                let events = ParserDriver.run(bytes, chunkEnds: [split])
                XCTAssertEqual(events, reference, "\(name) split at \(split)")
                if events != reference { break }
            }
            XCTAssertEqual(ParserDriver.byteByByte(bytes), reference, "\(name) byte by byte")
            let thirds = [bytes.count / 3, 2 * bytes.count / 3].filter { $0 > 0 }
            XCTAssertEqual(ParserDriver.run(bytes, chunkEnds: thirds), reference, "\(name) in thirds")
        }
    }

    func testSimpleRequestHead() throws {
        let events = ParserDriver.whole([UInt8](http: "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Trace:  abc  \r\n\r\n"))
        XCTAssertEqual(events.count, 2)
        guard case .head(let head) = events[0] else { return XCTFail("\(events)") }
        XCTAssertEqual(head.method, .get)
        XCTAssertEqual(head.path, "/health")
        XCTAssertNil(head.query)
        XCTAssertEqual(head.version, .http1_1)
        XCTAssertEqual(head.headers, ["Host: localhost", "X-Trace: abc"])
        XCTAssertTrue(head.keepAlive)
        XCTAssertEqual(head.framing, .contentLength(0))
        XCTAssertEqual(events[1], .end)
    }

    func testHeaderLookupIsCaseInsensitive() throws {
        let head = try parseHead("GET / HTTP/1.1\r\nContent-Type: text/plain\r\nX-Multi: 1\r\nx-multi: 2\r\nConnection: Keep-Alive, Foo\r\n\r\n")
        XCTAssertEqual(head.headers["content-type"], "text/plain")
        XCTAssertEqual(head.headers["CONTENT-TYPE"], "text/plain")
        XCTAssertEqual(head.headers.values("X-MULTI"), ["1", "2"])
        XCTAssertTrue(head.headers.contains("x-Multi"))
        XCTAssertFalse(head.headers.contains("X-Missing"))
        XCTAssertNil(head.headers["Content-Typ"])
        XCTAssertTrue(head.headers.containsToken("foo", in: "connection"))
        XCTAssertTrue(head.headers.containsToken("keep-alive", in: "CONNECTION"))
        XCTAssertFalse(head.headers.containsToken("close", in: "Connection"))
    }

    func testHeaderLookupMatchesWholeNamesInAnyCaseAndReadsValuesInPlace() throws {
        let head = try parseHead(
            "GET / HTTP/1.1\r\nX-Parse-Session-Tokens: no\r\nx-parse-session-token: first\r\n"
                + "X-PARSE-SESSION-TOKEN: second\r\nX-Parse-Session-Toke: no\r\nX-Parse-Empty:\r\n"
                + "X~Tilde: t\r\nX^Caret: c\r\n\r\n")
        let headers = head.headers
        XCTAssertEqual(headers["X-Parse-Session-Token"], "first", "the first of duplicates, whatever its case")
        XCTAssertEqual(headers.values("x-Parse-session-TOKEN"), ["first", "second"])
        XCTAssertEqual(headers.withFirstValue("X-Parse-Session-Token") { Array($0) }, Array("first".utf8))
        XCTAssertEqual(headers.withFirstValue("X-Parse-Empty") { $0.count }, 0, "an empty value is present")
        XCTAssertNil(headers.withFirstValue("X-Parse-Missing") { $0.count })
        XCTAssertNil(headers["X-Parse-Session-Tok"], "a prefix is not a match")
        XCTAssertNil(headers["X-Parse-Session-Token-"], "nor a longer name")
        // Only letters fold: `~` (0x7E) and `^` (0x5E) differ by 0x20 but are different names.
        XCTAssertEqual(headers["x~tilde"], "t")
        XCTAssertNil(headers["X^Tilde"])
        XCTAssertNil(headers["X~Caret"])
        XCTAssertEqual(headers["X^CARET"], "c")
        // Non-ASCII names never match a field (fields are tokens), and `é` is not folded.
        XCTAssertNil(headers["X-Parse-Empté"])
    }

    func testPercentDecodedPathAndQuery() throws {
        let head = try parseHead("GET /files/a%20b/%C3%A9t%C3%A9?q=caf%C3%A9+au+lait&empty=&flag&q=second&bad=%zz HTTP/1.1\r\n\r\n")
        XCTAssertEqual(head.path, "/files/a b/été")
        XCTAssertEqual(head.target, "/files/a%20b/%C3%A9t%C3%A9?q=caf%C3%A9+au+lait&empty=&flag&q=second&bad=%zz")
        XCTAssertEqual(head.query, "q=caf%C3%A9+au+lait&empty=&flag&q=second&bad=%zz")
        XCTAssertEqual(head.queryParameter("q"), "café au lait")
        XCTAssertEqual(head.queryParameter("empty"), "")
        XCTAssertEqual(head.queryParameter("flag"), "")
        XCTAssertEqual(head.queryParameter("bad"), "%zz")
        XCTAssertNil(head.queryParameter("missing"))
        XCTAssertEqual(head.queryParameters.map(\.name), ["q", "empty", "flag", "q", "bad"])
    }

    func testQueryParametersSplitAtEveryAmpersandAndTheFirstEquals() throws {
        let head = try parseHead("GET /q?&a=1&&b=x=y&=v&c&d=&" + String(repeating: "e", count: 40) + "=" + String(repeating: "f", count: 40) + "& HTTP/1.1\r\n\r\n")
        XCTAssertEqual(head.queryParameters.map { "\($0.name)|\($0.value)" }, [
            "a|1", "b|x=y", "|v", "c|", "d|", String(repeating: "e", count: 40) + "|" + String(repeating: "f", count: 40),
        ])
        XCTAssertEqual(try parseHead("GET /q? HTTP/1.1\r\n\r\n").queryParameters.count, 0)
        XCTAssertEqual(try parseHead("GET /q?& HTTP/1.1\r\n\r\n").queryParameters.count, 0)
        XCTAssertEqual(try parseHead("GET /q?= HTTP/1.1\r\n\r\n").queryParameters.map { "\($0.name)|\($0.value)" }, ["|"])
    }

    func testRequestTargetForms() throws {
        let absolute = try parseHead("GET http://example.com:8080/over/there?name=ferret#nose HTTP/1.1\r\n\r\n")
        XCTAssertEqual(absolute.path, "/over/there")
        XCTAssertEqual(absolute.query, "name=ferret")
        let bare = try parseHead("GET http://example.com?x=1 HTTP/1.1\r\n\r\n")
        XCTAssertEqual(bare.path, "/")
        XCTAssertEqual(bare.queryParameter("x"), "1")
        let fragment = try parseHead("GET /a/b#frag?not-query HTTP/1.1\r\n\r\n")
        XCTAssertEqual(fragment.path, "/a/b")
        XCTAssertNil(fragment.query)
        let asterisk = try parseHead("OPTIONS * HTTP/1.1\r\n\r\n")
        XCTAssertEqual(asterisk.path, "*")
    }

    func testWholeHeadPassSplitsTargetsLikeTheTargetParser() throws {
        let targets = [
            "/", "/a", "/a?", "/a?b", "/?x=1&y=2", "/a?b#c", "/a?#", "/a#", "/a#b?c", "/a?b?c=d#e?f", "/a?b%zz+c#d%",
            "/a%20b?x=1", "/a%20b", "/a?where=%7B%22username%22%3A%2212345%22%7D&limit=1", "/long/path/segments?q=12345678#12345678",
            "http://h/p?q#f", "*",
        ]
        for target in targets {
            let parsed = try parseHead("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
            let built = try HTTPRequestHead(method: .get, target: target)
            XCTAssertEqual(parsed.target, target)
            XCTAssertEqual(parsed.path, built.path, target)
            XCTAssertEqual(parsed.query, built.query, target)
            XCTAssertEqual(parsed.queryParameters.map { "\($0.name)=\($0.value)" }, built.queryParameters.map { "\($0.name)=\($0.value)" }, target)
        }
    }

    func testKeepAliveRules() throws {
        XCTAssertTrue(try parseHead("GET / HTTP/1.1\r\n\r\n").keepAlive)
        XCTAssertFalse(try parseHead("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keepAlive)
        XCTAssertFalse(try parseHead("GET / HTTP/1.1\r\nConnection: keep-alive, CLOSE\r\n\r\n").keepAlive)
        XCTAssertFalse(try parseHead("GET / HTTP/1.0\r\n\r\n").keepAlive)
        XCTAssertTrue(try parseHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepAlive)
        XCTAssertFalse(try parseHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n").keepAlive)
    }

    func testExpectContinue() throws {
        XCTAssertTrue(try parseHead("PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expectContinue)
        XCTAssertFalse(try parseHead("PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expectContinue)
        XCTAssertFalse(try parseHead("PUT / HTTP/1.1\r\nContent-Length: 1\r\n\r\n").expectContinue)
    }

    func testChunkedBodyIsDechunked() {
        let events = ParserDriver.byteByByte([UInt8](http:
            "POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\nGET /next HTTP/1.1\r\n\r\n"))
        XCTAssertEqual(events.count, 5, "\(events)")
        XCTAssertEqual(events[1], .body(Array("hello world".utf8)))
        XCTAssertEqual(events[2], .end)
        guard case .head(let next) = events[3] else { return XCTFail("\(events)") }
        XCTAssertEqual(next.path, "/next")
        XCTAssertEqual(events[4], .end)
    }

    func testUpgradeStopsTheParserAndLeavesTheRest() {
        let text = "GET /v1/socket HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\nFRAME BYTES"
        for events in [ParserDriver.whole([UInt8](http: text)), ParserDriver.byteByByte([UInt8](http: text))] {
            XCTAssertEqual(events.count, 3, "\(events)")
            guard case .head(let head) = events[0] else { return XCTFail("\(events)") }
            XCTAssertTrue(head.isUpgrade)
            XCTAssertEqual(events[1], .end)
            XCTAssertEqual(events[2], .upgraded(leftover: Array("FRAME BYTES".utf8)))
        }
        // Upgrade on HTTP/1.0 is ignored (RFC 9110 §7.8).
        let old = ParserDriver.whole([UInt8](http: "GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"))
        guard case .head(let head) = old.first else { return XCTFail("\(old)") }
        XCTAssertFalse(head.isUpgrade)
    }

    func testPhaseTracksHeadAndBody() throws {
        var parser = HTTPRequestParser()
        XCTAssertEqual(parser.phase, .idle)
        try feed(&parser, "GET / HT")
        XCTAssertEqual(parser.phase, .head)
        try feed(&parser, "TP/1.1\r\nContent-Length: 4\r\n\r\nab")
        XCTAssertEqual(parser.phase, .body)
        try feed(&parser, "cd")
        XCTAssertEqual(parser.phase, .idle)
        try feed(&parser, "\r")
        XCTAssertEqual(parser.phase, .head)
        try feed(&parser, "\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(parser.phase, .closed)
        try feed(&parser, "\r\n")
        XCTAssertEqual(parser.phase, .closed)
        XCTAssertThrowsError(try feed(&parser, "GET")) { XCTAssertEqual($0 as? HTTPParserError, .dataAfterClose) }
        XCTAssertEqual(parser.phase, .failed)
        XCTAssertThrowsError(try feed(&parser, "")) { XCTAssertEqual($0 as? HTTPParserError, .dataAfterClose) }
    }

    // MARK: - Malformed input

    /// Smuggling shapes, oversized input and invalid chunked framing, with the status each gets.
    static let malformedCorpus: [(name: String, text: String, error: HTTPParserError)] = {
        let bigValue = String(repeating: "v", count: 16 * 1024)
        let manyHeaders = (0...100).map { "X-\($0): \($0)\r\n" }.joined()
        let exactlyHundred = (0..<100).map { "X-\($0): \($0)\r\n" }.joined()
        return [
            ("CL then TE", "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .contentLengthWithTransferEncoding),
            ("TE then CL", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", .contentLengthWithTransferEncoding),
            ("conflicting CL", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", .duplicateContentLength),
            ("identical CL twice", "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab", .duplicateContentLength),
            ("CL list", "POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab", .invalidContentLength),
            ("CL sign", "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\nab", .invalidContentLength),
            ("CL hex", "POST / HTTP/1.1\r\nContent-Length: 0x2\r\n\r\nab", .invalidContentLength),
            ("CL empty", "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", .invalidContentLength),
            ("CL inner space", "POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", .invalidContentLength),
            ("CL overflow", "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", .invalidContentLength),
            ("CL over limit", "POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", .bodyTooLarge),
            ("TE not chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", .invalidTransferEncoding),
            ("TE chunked not last", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .invalidTransferEncoding),
            ("TE chunked twice", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", .invalidTransferEncoding),
            ("TE chunked with parameter", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", .invalidTransferEncoding),
            ("TE xchunked", "POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", .invalidTransferEncoding),
            ("TE empty", "POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n", .invalidTransferEncoding),
            ("TE gzip then chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", .unsupportedTransferEncoding),
            ("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .transferEncodingInHTTP10),
            ("bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .invalidChunkSize),
            ("negative chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", .invalidChunkSize),
            ("empty chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", .invalidChunkSize),
            ("space after chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\na\r\n0\r\n\r\n", .invalidChunkSize),
            ("chunk size overflow", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffff\r\n", .bodyTooLarge),
            ("chunk over limit", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n", .bodyTooLarge),
            ("chunks over limit together",
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n80000\r\n" + String(repeating: "a", count: 0x80000)
                + "\r\n80000\r\n" + String(repeating: "b", count: 0x80000) + "\r\n1\r\n", .bodyTooLarge),
            ("chunk data too long", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", .invalidChunkTerminator),
            ("chunk data bare LF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\n0\r\n\r\n", .invalidChunkTerminator),
            ("chunk size bare LF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n", .invalidChunkSize),
            ("chunk size bare CR", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\rab\r\n", .bareCarriageReturn),
            ("empty chunk extension", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\nab\r\n", .invalidChunkExtension),
            ("unterminated quoted extension", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\"b\r\nab\r\n", .invalidChunkExtension),
            ("chunk extensions too large",
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 5000) + "\r\n", .chunkExtensionsTooLarge),
            ("trailer obs-fold", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: b\r\n c\r\n\r\n", .obsoleteLineFolding),
            ("trailer bad name", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA b: c\r\n\r\n", .invalidTrailer),
            ("obs-fold", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", .obsoleteLineFolding),
            ("whitespace after start line", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", .obsoleteLineFolding),
            ("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", .invalidHeaderName),
            ("empty header name", "GET / HTTP/1.1\r\n: a\r\n\r\n", .invalidHeaderName),
            ("bad header name token", "GET / HTTP/1.1\r\nX(y): a\r\n\r\n", .invalidHeaderName),
            ("bare CR in value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", .bareCarriageReturn),
            ("bare CR line end", "GET / HTTP/1.1\r\nX: a\r\r\n\r\n", .bareCarriageReturn),
            ("bare LF in headers", "GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n", .bareLineFeed),
            ("bare LF after request line", "GET / HTTP/1.1\nX: a\r\n\r\n", .bareLineFeed),
            ("bare LF before request", "\nGET / HTTP/1.1\r\n\r\n", .bareLineFeed),
            ("NUL in value", "GET / HTTP/1.1\r\nX: a\u{0}b\r\n\r\n", .invalidHeaderValue),
            ("DEL in value", "GET / HTTP/1.1\r\nX: a\u{7F}b\r\n\r\n", .invalidHeaderValue),
            ("bad method token", "G(T / HTTP/1.1\r\n\r\n", .invalidMethod),
            ("lower-case method", "get / HTTP/1.1\r\n\r\n", .methodNotImplemented),
            ("unknown method", "BREW /pot HTTP/1.1\r\n\r\n", .methodNotImplemented),
            ("CONNECT", "CONNECT example.com:443 HTTP/1.1\r\n\r\n", .methodNotImplemented),
            ("PRI preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", .methodNotImplemented),
            ("long method", "ABCDEFGHIJKLMNOP / HTTP/1.1\r\n\r\n", .methodNotImplemented),
            ("double space", "GET  / HTTP/1.1\r\n\r\n", .invalidRequestLine),
            ("control in target", "GET /a\u{1}b HTTP/1.1\r\n\r\n", .invalidTarget),
            ("UTF-8 in target", "GET /caf\u{E9} HTTP/1.1\r\n\r\n", .invalidTarget),
            ("authority-form", "GET example.com:80 HTTP/1.1\r\n\r\n", .invalidTarget),
            ("bad percent escape", "GET /a%zz HTTP/1.1\r\n\r\n", .invalidTarget),
            ("encoded NUL", "GET /a%00b HTTP/1.1\r\n\r\n", .invalidTarget),
            ("encoded invalid UTF-8", "GET /a%FFb HTTP/1.1\r\n\r\n", .invalidTarget),
            ("HTTP/0.9", "GET /\r\n\r\n", .unsupportedVersion),
            ("HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", .unsupportedVersion),
            ("HTTP/1.2", "GET / HTTP/1.2\r\n\r\n", .unsupportedVersion),
            ("lower-case protocol", "GET / http/1.1\r\n\r\n", .invalidRequestLine),
            ("space after version", "GET / HTTP/1.1 \r\n\r\n", .invalidRequestLine),
            ("ICE protocol", "SOURCE / ICE/1.0\r\n\r\n", .invalidRequestLine),
            ("duplicate Host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .duplicateHost),
            ("unknown expectation", "PUT / HTTP/1.1\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx", .unsupportedExpectation),
            ("head over 16 KiB", "GET / HTTP/1.1\r\nX-Big: \(bigValue)\r\n\r\n", .headTooLarge),
            ("target over 16 KiB", "GET /\(bigValue) HTTP/1.1\r\n\r\n", .headTooLarge),
            ("101 headers", "GET / HTTP/1.1\r\n\(manyHeaders)\r\n", .tooManyHeaders),
            ("100 headers and a close", "GET / HTTP/1.1\r\n\(exactlyHundred)Connection: close\r\n\r\n", .tooManyHeaders),
            ("data after close", "GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n", .dataAfterClose),
            ("data after HTTP/1.0", "GET / HTTP/1.0\r\n\r\n\r\nX", .dataAfterClose),
        ]
    }()

    func testMalformedCorpusGetsTheRightErrorAtEverySplit() {
        for (name, text, expected) in Self.malformedCorpus {
            let bytes = [UInt8](http: text)
            let reference = ParserDriver.whole(bytes)
            XCTAssertEqual(reference.last, .error(expected), "\(name): \(reference)")
            // Large inputs: a sample of split points; small ones: every boundary and byte by byte.
            let splits = bytes.count <= 2048 ? Array(1..<bytes.count) : Array(stride(from: 1, to: bytes.count, by: bytes.count / 16))
            for split in splits {
                let events = ParserDriver.run(bytes, chunkEnds: [split])
                XCTAssertEqual(events, reference, "\(name) split at \(split)")
                if events != reference { break }
            }
            if bytes.count <= 2048 {
                XCTAssertEqual(ParserDriver.byteByByte(bytes), reference, "\(name) byte by byte")
            }
        }
    }

    func testErrorStatuses() {
        XCTAssertEqual(HTTPParserError.contentLengthWithTransferEncoding.status, .badRequest)
        XCTAssertEqual(HTTPParserError.headTooLarge.status.code, 431)
        XCTAssertEqual(HTTPParserError.tooManyHeaders.status.code, 431)
        XCTAssertEqual(HTTPParserError.trailersTooLarge.status.code, 431)
        XCTAssertEqual(HTTPParserError.bodyTooLarge.status.code, 413)
        XCTAssertEqual(HTTPParserError.unsupportedTransferEncoding.status.code, 501)
        XCTAssertEqual(HTTPParserError.methodNotImplemented.status.code, 501)
        XCTAssertEqual(HTTPParserError.unsupportedVersion.status.code, 505)
        XCTAssertEqual(HTTPParserError.unsupportedExpectation.status.code, 417)
        XCTAssertEqual(HTTPParserError.obsoleteLineFolding.status.code, 400)
    }

    func testLimitsAreConfigurableAndExact() {
        let limits = HTTPParserLimits(maxHeadBytes: 64, maxHeaderCount: 2, maxBodyBytes: 5)
        let head64 = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 64 - 23) + "\r\n\r\n"
        XCTAssertEqual(head64.utf8.count, 64)
        XCTAssertEqual(ParserDriver.whole([UInt8](http: head64), limits: limits).last, .end)
        let head65 = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 65 - 23) + "\r\n\r\n"
        XCTAssertEqual(ParserDriver.byteByByte([UInt8](http: head65), limits: limits).last, .error(.headTooLarge))
        XCTAssertEqual(ParserDriver.whole([UInt8](http: "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n"), limits: limits).last, .end)
        XCTAssertEqual(ParserDriver.whole([UInt8](http: "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"), limits: limits).last, .error(.tooManyHeaders))
        XCTAssertEqual(ParserDriver.whole([UInt8](http: "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n12345"), limits: limits).last, .end)
        XCTAssertEqual(ParserDriver.whole([UInt8](http: "POST / HTTP/1.1\r\nContent-Length: 6\r\n\r\n"), limits: limits).last, .error(.bodyTooLarge))
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n"
        XCTAssertEqual(ParserDriver.whole([UInt8](http: chunked + "0\r\n\r\n"), limits: limits).last, .end)
        XCTAssertEqual(ParserDriver.whole([UInt8](http: chunked + "1\r\nf\r\n0\r\n\r\n"), limits: limits).last, .error(.bodyTooLarge))
        // The limit applies to each request of a pipeline, not to the connection.
        let twice = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n12345POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n12345"
        XCTAssertEqual(ParserDriver.whole([UInt8](http: twice), limits: limits).filter { $0 == .end }.count, 2)
    }

    func testHeadBuiltInCode() throws {
        let head = try HTTPRequestHead(method: .post, target: "/a%2Fb?x=1", headers: ["Content-Length": "3"])
        XCTAssertEqual(head.path, "/a/b")
        XCTAssertEqual(head.queryParameter("x"), "1")
        XCTAssertEqual(head.bodyFraming, .contentLength(3))
        XCTAssertThrowsError(try HTTPRequestHead(method: .get, target: "no spaces allowed"))
    }

    func testReusedHeadMemoryLeavesKeptRequestsIntact() throws {
        var parser = HTTPRequestParser()
        var kept: [HTTPRequest] = []
        let texts = [
            "GET /first?x=1 HTTP/1.1\r\nHost: a\r\nX-One: 1\r\n\r\n",
            "GET /second/longer/path?y=2 HTTP/1.1\r\nHost: b\r\nX-Two: two\r\nX-Three: 3\r\n\r\n",
            "GET /3 HTTP/1.1\r\nHost: c\r\n\r\n",
            "GET /fourth HTTP/1.1\r\nHost: d\r\nX-Four: " + String(repeating: "4", count: 5000) + "\r\n\r\n",
            "GET /fifth HTTP/1.1\r\nHost: e\r\n\r\n",
        ]
        for (index, text) in texts.enumerated() {
            let bytes = [UInt8](http: text)
            let (event, consumed) = try bytes.withUnsafeBytes { try parser.nextEvent(in: $0) }
            guard case .head(let head)? = event else { return XCTFail("no head for request \(index)") }
            let (end, _) = try bytes.withUnsafeBytes { try parser.nextEvent(in: UnsafeRawBufferPointer(rebasing: $0[consumed...])) }
            guard case .end? = end else { return XCTFail("no end for request \(index)") }
            let request = HTTPRequest(head: head)
            // Every other request is kept (its memory is shared), the others are handed back.
            if index % 2 == 0 { kept.append(request) }
            parser.reuseHeadMemory(of: request)
        }
        XCTAssertEqual(kept.map(\.path), ["/first", "/3", "/fifth"])
        XCTAssertEqual(kept.map { $0.headers["Host"] }, ["a", "c", "e"])
        XCTAssertEqual(kept[0].queryParameter("x"), "1")
        XCTAssertEqual(kept[0].headers["X-One"], "1")
        XCTAssertEqual(kept[0].headers.count, 2)
        // Requests parsed into reused memory.
        let reused = try [UInt8](http: texts[1] + texts[3]).withUnsafeBytes { bytes in
            var heads: [HTTPRequestHead] = []
            var offset = 0
            while offset < bytes.count {
                let (event, consumed) = try parser.nextEvent(in: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                offset += consumed
                if case .head(let head)? = event { heads.append(head) }
            }
            return heads
        }
        XCTAssertEqual(reused.map(\.path), ["/second/longer/path", "/fourth"])
        XCTAssertEqual(reused[0].headers["X-Three"], "3")
        XCTAssertEqual(reused[0].queryParameter("y"), "2")
        XCTAssertEqual(reused[1].headers["X-Four"]?.count, 5000)
    }

    // MARK: - Helpers

    private func parseHead(_ text: String) throws -> HTTPRequestHead {
        var parser = HTTPRequestParser()
        let bytes = [UInt8](http: text)
        let (event, _) = try bytes.withUnsafeBytes { try parser.nextEvent(in: $0) }
        guard case .head(let head)? = event else {
            XCTFail("no head for \(text.debugDescription)")
            throw HTTPParserError.invalidRequestLine
        }
        return head
    }

    private func feed(_ parser: inout HTTPRequestParser, _ text: String) throws {
        let bytes = [UInt8](http: text)
        var offset = 0
        while true {
            let (event, consumed) = try bytes.withUnsafeBytes { try parser.nextEvent(in: UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            offset += consumed
            if event == nil { break }
        }
    }
}
