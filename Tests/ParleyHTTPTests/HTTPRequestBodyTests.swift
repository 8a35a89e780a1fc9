import Foundation
import ParleyNet
import Synchronization
import XCTest
@testable import ParleyHTTP

/// Request bodies per route: buffered with a limit, or streamed to the handler with backpressure.
final class HTTPRequestBodyTests: XCTestCase {
    private var group: EventLoopGroup!
    private var servers: [HTTPServer] = []

    /// The most bytes a streaming handler saw buffered in its stream.
    final class Gauge: Sendable {
        let value = Atomic<Int>(0)
        func record(_ bytes: Int) { _ = value.max(bytes, ordering: .relaxed) }
        func load() -> Int { value.load(ordering: .relaxed) }
    }

    private let maxBuffered = Gauge()

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 2)
    }

    override func tearDown() {
        for server in servers { server.closeAll() }
        servers = []
        group.shutdownGracefully()
        group = nil
    }

    private func startServer(maxBodyBytes: Int = 1 << 20) throws -> HTTPServer {
        let router = Router()
        let gauge = maxBuffered
        // Counts the body as it arrives; slower than the socket (a pause every 16 chunks), so
        // the connection has to hold back.
        router.on(.post, "/upload", body: .streamed(limit: 64 << 20)) { request, _ in
            let stream = try XCTUnwrap(request.bodyStream)
            var count = 0
            var chunks = 0
            while let chunk = try await stream.next() {
                count += chunk.count
                chunks += 1
                gauge.record(stream.bufferedBytes)
                if chunks % 16 == 0 { try await Task.sleep(for: .milliseconds(1)) }
            }
            return HTTPResponse(body: "\(count)")
        }
        router.on(.post, "/small-upload", body: .streamed(limit: 1000)) { request, _ in
            var count = 0
            while let chunk = try await request.bodyStream!.next() { count += chunk.count }
            return HTTPResponse(body: "\(count)")
        }
        router.on(.get, "/streamed-get", body: .streamed()) { request, _ in
            HTTPResponse(body: try await request.bodyStream?.next() == nil ? "empty" : "bytes")
        }
        // Answers before reading the body.
        router.on(.post, "/reject", body: .streamed()) { _, _ in HTTPResponse(status: .forbidden, body: "no") }
        router.on(.post, "/echo", body: .buffered(limit: 1000)) { request, _ in HTTPResponse(body: request.body) }
        router.post("/default") { request, _ in HTTPResponse(body: "\(request.body.count)") }
        let api = router.group("/api").answeringBodyTooLarge(
            with: HTTPResponse(status: .contentTooLarge, headers: ["Content-Type": "application/json"], body: #"{"error":"too big"}"#))
        api.on(.post, "/echo", body: .buffered(limit: 100)) { request, _ in HTTPResponse(body: request.body) }
        router.inline(.get, "/health") { _, _ in HTTPResponse(body: "ok") }
        var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        configuration.limits.maxBodyBytes = maxBodyBytes
        let server = HTTPServer(group: group, configuration: configuration, router: router)
        try server.start()
        servers.append(server)
        return server
    }

    private func assertServes(_ server: HTTPServer, file: StaticString = #filePath, line: UInt = #line) throws {
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "ok", file: file, line: line)
    }

    private static func chunked(_ parts: [Int]) -> [UInt8] {
        var bytes: [UInt8] = []
        for size in parts {
            bytes += Array(String(size, radix: 16).utf8) + [13, 10] + [UInt8](repeating: 0x78, count: size) + [13, 10]
        }
        return bytes + Array("0\r\n\r\n".utf8)
    }

    // MARK: - Streamed

    func testFiftyMegabyteStreamedUploadIsCountedWithBoundedBuffering() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port, timeoutSeconds: 60)
        let total = 50 << 20
        try client.send("POST /upload HTTP/1.1\r\nContent-Length: \(total)\r\n\r\n")
        let block = [UInt8](repeating: 0x41, count: 1 << 20)
        for _ in 0..<(total >> 20) { try client.send(block) }
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, String(total))
        // The high-water mark, plus at most one read that was already taken from the socket.
        XCTAssertGreaterThan(maxBuffered.load(), 0)
        XCTAssertLessThanOrEqual(maxBuffered.load(), HTTPRequestBodyStream.highWater + (64 << 10))
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "ok", "kept alive after the upload")
    }

    func testChunkedStreamedUploadAndPipelinedRequestAfterIt() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port, timeoutSeconds: 30)
        let parts = Array(repeating: 100_000, count: 100) + [7]
        try client.send(Array("POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + Self.chunked(parts)
            + Array("GET /health HTTP/1.1\r\n\r\n".utf8))
        XCTAssertEqual(try client.readResponse().text, String(parts.reduce(0, +)))
        XCTAssertEqual(try client.readResponse().text, "ok")
    }

    func testBodilessRequestToAStreamingRouteGetsAnEndedStream() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /streamed-get HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "empty")
    }

    func testStreamedBodyOverItsLimit() throws {
        let server = try startServer()
        // Declared: 413 before any body byte, then close.
        let declared = try HTTPTestClient(port: server.port)
        try declared.send("POST /small-upload HTTP/1.1\r\nContent-Length: 1001\r\n\r\n")
        let refused = try declared.readResponse()
        XCTAssertEqual(refused.status, 413)
        XCTAssertEqual(refused.header("Connection"), "close")
        XCTAssertTrue(declared.readsEOF())
        // Chunked: the handler's next() throws once past it; its error is the answer, then close.
        let chunked = try HTTPTestClient(port: server.port)
        try chunked.send(Array("POST /small-upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + Self.chunked([600, 600]))
        let late = try chunked.readResponse()
        XCTAssertEqual(late.status, 413)
        XCTAssertEqual(late.header("Connection"), "close")
        XCTAssertTrue(chunked.readsEOF())
        // Exactly at the limit is fine.
        let exact = try HTTPTestClient(port: server.port)
        try exact.send(Array("POST /small-upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + Self.chunked([600, 400]))
        XCTAssertEqual(try exact.readResponse().text, "1000")
        try assertServes(server)
    }

    func testMalformedChunkedStreamedBodyGets400AndTheServerKeepsServing() throws {
        let server = try startServer()
        for bad in ["zz\r\nabc\r\n0\r\n\r\n", "3\r\nabcX\r\n0\r\n\r\n", "3 \r\nabc\r\n0\r\n\r\n"] {
            let client = try HTTPTestClient(port: server.port)
            try client.send("POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + bad)
            let response = try client.readResponse()
            XCTAssertEqual(response.status, 400, bad.debugDescription)
            XCTAssertEqual(response.header("Connection"), "close")
            XCTAssertTrue(client.readsEOF())
        }
        try assertServes(server)
    }

    func testAnswerBeforeTheBodyIsReadClosesTheConnection() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /reject HTTP/1.1\r\nContent-Length: 1000000\r\n\r\nabc")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 403)
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(client.closedWithin(seconds: 3))
        try assertServes(server)
    }

    func testClientVanishingMidBodyFailsTheStreamAndTheServerKeepsServing() throws {
        let server = try startServer()
        do {
            let client = try HTTPTestClient(port: server.port)
            try client.send("POST /upload HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n" + String(repeating: "a", count: 5000))
            client.shutdownWrite()
            XCTAssertTrue(client.closedWithin(seconds: 3))
        }
        XCTAssertTrue(waitUntilNoConnections(server))
        try assertServes(server)
    }

    private func waitUntilNoConnections(_ server: HTTPServer) -> Bool {
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            if server.openConnections() == 0 { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    // MARK: - Buffered, per route

    func testBufferedBodyLimitPerRoute() throws {
        let server = try startServer(maxBodyBytes: 2000)
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "e", count: 1000))
        XCTAssertEqual(try client.readResponse().body.count, 1000)
        try client.send("POST /echo HTTP/1.1\r\nContent-Length: 1001\r\n\r\n")
        let refused = try client.readResponse()
        XCTAssertEqual(refused.status, 413)
        XCTAssertEqual(refused.header("Connection"), "close")
        // A route without its own limit has the server's.
        let other = try HTTPTestClient(port: server.port)
        try other.send("POST /default HTTP/1.1\r\nContent-Length: 2000\r\n\r\n" + String(repeating: "d", count: 2000))
        XCTAssertEqual(try other.readResponse().text, "2000")
        try other.send(Array("POST /default HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + Self.chunked([1500, 501]))
        XCTAssertEqual(try other.readResponse().status, 413)
        XCTAssertTrue(other.readsEOF())
        // No route: the server's limit, 413 at once.
        let unrouted = try HTTPTestClient(port: server.port)
        try unrouted.send("POST /nowhere HTTP/1.1\r\nContent-Length: 2001\r\n\r\n")
        XCTAssertEqual(try unrouted.readResponse().status, 413)
        try assertServes(server)
    }

    func testGroupAnswersAnOversizedBodyInItsOwnFormat() throws {
        let server = try startServer()
        for request in [
            Array("POST /api/echo HTTP/1.1\r\nContent-Length: 101\r\n\r\n".utf8),
            Array("POST /api/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8) + Self.chunked([60, 60]),
        ] {
            let client = try HTTPTestClient(port: server.port)
            try client.send(request)
            let response = try client.readResponse()
            XCTAssertEqual(response.status, 413)
            XCTAssertEqual(response.header("Content-Type"), "application/json")
            XCTAssertEqual(response.text, #"{"error":"too big"}"#)
        }
    }

    func testMalformedChunkedBufferedBodyGets400AndTheServerKeepsServing() throws {
        let server = try startServer()
        for bad in ["zz\r\nabc\r\n0\r\n\r\n", "3\r\nabcX\r\n0\r\n\r\n", "-1\r\n\r\n", "3\nabc\r\n0\r\n\r\n"] {
            let client = try HTTPTestClient(port: server.port)
            try client.send("POST /default HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + bad)
            XCTAssertEqual(try client.readResponse().status, 400, bad.debugDescription)
            XCTAssertTrue(client.readsEOF())
        }
        try assertServes(server)
    }
}
