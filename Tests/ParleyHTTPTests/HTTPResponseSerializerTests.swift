import XCTest
@testable import ParleyHTTP

final class HTTPResponseSerializerTests: XCTestCase {
    private let date = Array("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n".utf8)

    private func head(_ response: HTTPResponse, keepAlive: Bool = true, headRequest: Bool = false) -> String {
        var buffer: [UInt8] = []
        HTTPResponseSerializer.writeHead(response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: date, into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    func testSerializedFieldsWriteTheSameHead() {
        let responses = [
            HTTPResponse(body: "hello"),
            HTTPResponse(headers: ["Content-Type": "text/plain", "X-A": "1"], body: "hello"),
            HTTPResponse(headers: ["Content-Length": "x", "content-length": "7", "Date": "yesterday", "Connection": "close", "Y": ""]),
            HTTPResponse(headers: ["Transfer-Encoding": "chunked", "X": "y"], body: "abc"),
            HTTPResponse(status: .switchingProtocols, headers: ["Connection": "Upgrade", "Upgrade": "websocket"]),
            HTTPResponse(status: .noContent, headers: ["Content-Length": "5"]),
        ]
        for response in responses {
            let fields = SerializedFields(response.headers, switching: response.status.code == 101)
            for (keepAlive, headRequest) in [(true, false), (false, false), (true, true), (false, true)] {
                var output = ArrayOutput(bytes: [])
                HTTPResponseSerializer.writeHead(
                    response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: date, fields: fields, into: &output)
                XCTAssertEqual(
                    String(decoding: output.bytes, as: UTF8.self), head(response, keepAlive: keepAlive, headRequest: headRequest),
                    "\(response.headers) keepAlive \(keepAlive) head \(headRequest)")
            }
        }
    }

    func testSerializedFieldsServeOnlyTheFieldsTheyWereMadeOf() {
        let headers: HTTPHeaders = ["Content-Type": "application/json", "X-A": "1"]
        let fields = SerializedFields(headers, switching: false)
        let copy = headers
        XCTAssertTrue(fields.serves(copy, switching: false))
        XCTAssertFalse(fields.serves(copy, switching: true))
        // Equal fields built separately, or a changed copy, are other storage: not served.
        XCTAssertFalse(fields.serves(["Content-Type": "application/json", "X-A": "1"], switching: false))
        var changed = headers
        changed.add("X-B", "2")
        XCTAssertFalse(fields.serves(changed, switching: false))
        var replaced = headers
        replaced.remove("X-A")
        XCTAssertFalse(fields.serves(replaced, switching: false))
        XCTAssertTrue(fields.serves(headers, switching: false))
        XCTAssertFalse(fields.asksToClose)
        XCTAssertTrue(SerializedFields(["Connection": "keep-alive, Close"], switching: false).asksToClose)
    }

    func testDecimals() {
        for value in [0, 7, 10, 99, 100, 4096, 12_345_678, 99_999_999, 100_000_000, 1_234_567_890_123, Int.max] {
            var output = ArrayOutput(bytes: [])
            HTTPResponseSerializer.appendDecimal(value, into: &output)
            XCTAssertEqual(String(decoding: output.bytes, as: UTF8.self), String(value))
        }
    }

    func testImfFixdate() {
        XCTAssertEqual(HTTPDate.format(secondsSinceEpoch: 784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(secondsSinceEpoch: 0), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(secondsSinceEpoch: 951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(secondsSinceEpoch: 4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT")
        var cache = HTTPDateCache()
        cache.refresh(now: 784_111_777)
        XCTAssertEqual(cache.headerLine, date)
        cache.refresh(now: 784_111_778)
        XCTAssertEqual(String(decoding: cache.headerLine, as: UTF8.self), "Date: Sun, 06 Nov 1994 08:49:38 GMT\r\n")
    }

    func testHeadHasDateContentLengthAndConnection() {
        var response = HTTPResponse(body: "hello")
        response.headers.add("Content-Type", "text/plain")
        XCTAssertEqual(head(response), "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\n"
            + "Connection: keep-alive\r\nContent-Type: text/plain\r\n\r\n")
        XCTAssertEqual(head(HTTPResponse(status: 413), keepAlive: false), "HTTP/1.1 413 Content Too Large\r\n"
            + "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(head(HTTPResponse(status: 599)), "HTTP/1.1 599 Server Error\r\n"
            + "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n")
    }

    func testServerOwnsFraming() {
        let response = HTTPResponse(
            headers: ["Content-Length": "999", "Transfer-Encoding": "chunked", "Connection": "keep-alive", "Date": "yesterday", "X": "y"],
            body: "abc")
        XCTAssertEqual(head(response, keepAlive: false), "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n"
            + "Date: yesterday\r\nX: y\r\n\r\n")
    }

    func testHeadResponsesDescribeTheBodyWithoutSendingIt() {
        let response = HTTPResponse(body: "hello")
        XCTAssertTrue(head(response, headRequest: true).contains("Content-Length: 5\r\n"))
        XCTAssertFalse(HTTPResponseSerializer.sendsBody(response, headRequest: true))
        XCTAssertTrue(HTTPResponseSerializer.sendsBody(response, headRequest: false))
        let declared = HTTPResponse(headers: ["Content-Length": "1234"])
        XCTAssertTrue(head(declared, headRequest: true).contains("Content-Length: 1234\r\n"))
        XCTAssertTrue(head(declared, headRequest: false).contains("Content-Length: 0\r\n"))
    }

    func testBodilessStatuses() {
        let noContent = head(HTTPResponse(status: .noContent, body: "ignored"))
        XCTAssertFalse(noContent.contains("Content-Length"))
        XCTAssertFalse(HTTPResponseSerializer.sendsBody(HTTPResponse(status: .notModified, body: "x"), headRequest: false))
        let switching = head(HTTPResponse(status: .switchingProtocols, headers: ["Connection": "Upgrade", "Upgrade": "websocket"]))
        XCTAssertEqual(switching, "HTTP/1.1 101 Switching Protocols\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    }

    func testHeaderValuesCannotSplitTheResponse() {
        var headers = HTTPHeaders()
        headers.add("X-Evil", "a\r\nSet-Cookie: stolen=1")
        headers.add("Bad Name:", "v")
        XCTAssertEqual(headers["x-evil"], "a  Set-Cookie: stolen=1")
        XCTAssertEqual(headers.name(at: 1), "Bad-Name-")
        XCTAssertFalse(head(HTTPResponse(headers: headers)).contains("\r\nSet-Cookie"))
    }

    func testHeadersEditing() {
        var headers: HTTPHeaders = ["A": "1", "b": "2", "a": "3"]
        XCTAssertEqual(headers.values("a"), ["1", "3"])
        headers.set("A", "4")
        XCTAssertEqual(headers.map(\.name), ["b", "A"])
        XCTAssertEqual(headers["a"], "4")
        headers.remove("B")
        XCTAssertEqual(headers.count, 1)
        XCTAssertEqual(headers, ["A": "4"])
    }
}
