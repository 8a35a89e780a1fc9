import Foundation
import ParleyNet
import Synchronization
import XCTest
@testable import ParleyHTTP

/// Streamed response bodies and the slow-reader deadline, over real sockets.
final class HTTPStreamingTests: XCTestCase {
    private var group: EventLoopGroup!
    private var servers: [HTTPServer] = []
    /// Counts `next()` calls made by the `/stream` producers.
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        func load() -> Int { value.load(ordering: .relaxed) }
    }

    private let pulls = Counter()

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 2)
    }

    override func tearDown() {
        for server in servers { server.closeAll() }
        servers = []
        group.shutdownGracefully()
        group = nil
    }

    static let chunkSize = 64 << 10
    static let chunk = [UInt8](repeating: 0x61, count: chunkSize)
    static let megabyte = [UInt8](repeating: 0x62, count: 1 << 20)

    /// A producer of `total` bytes in 64 KiB chunks (the last one shorter), counting its calls;
    /// with `failAfter`, it throws once that many bytes are out.
    private static func producer(total: Int, failAfter: Int? = nil, pulls: Counter) -> @Sendable () async throws -> [UInt8]? {
        let sent = Counter()
        return {
            pulls.value.add(1, ordering: .relaxed)
            let done = sent.load()
            if let failAfter, done >= failAfter { throw CancellationError() }
            guard done < total else { return nil }
            let size = min(Self.chunkSize, total - done)
            sent.value.store(done + size, ordering: .relaxed)
            return size == Self.chunkSize ? Self.chunk : Array(Self.chunk[0..<size])
        }
    }

    private func startServer(_ configure: (inout HTTPServer.Configuration) -> Void = { _ in }) throws -> HTTPServer {
        let router = Router()
        let pulls = self.pulls
        router.get("/stream/:length") { request, context in
            let total = Int(context.parameters["length"] ?? "") ?? 0
            let failAfter = request.queryParameter("fail").flatMap(Int.init)
            let known = request.queryParameter("chunked") == nil
            return HTTPResponse(
                headers: ["Content-Type": "application/octet-stream"],
                body: .stream(length: known ? total : nil, next: Self.producer(total: total, failAfter: failAfter, pulls: pulls)))
        }
        router.get("/short") { _, _ in
            // Claims 10 bytes, sends 3.
            let done = Atomic<Bool>(false)
            return HTTPResponse(body: .stream(length: 10, next: {
                done.exchange(true, ordering: .relaxed) ? nil : Array("abc".utf8)
            }))
        }
        router.inline(.get, "/megabyte") { _, _ in HTTPResponse(body: Self.megabyte) }
        router.inline(.get, "/health") { _, _ in HTTPResponse(body: "ok") }
        var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        configure(&configuration)
        let server = HTTPServer(group: group, configuration: configuration, router: router)
        try server.start()
        servers.append(server)
        return server
    }

    /// This process's resident set, in bytes; nil when /proc cannot be read.
    private static func residentBytes() -> Int? {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").compactMap { Int($0) }.first.map { $0 * 1024 }
        }
        return nil
    }

    /// The resident set now; a reading that fails later counts as unbounded growth (never as 0).
    private static func peakResidentBytes() -> Int { residentBytes() ?? Int.max }

    private func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return condition()
    }

    // MARK: - Streamed responses

    func testFiftyMegabyteStreamWithLengthCompletesInBoundedMemory() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        let total = 50 << 20
        let before = try XCTUnwrap(Self.residentBytes(), "/proc/self/status has no VmRSS: memory cannot be measured")
        var peak = before
        try client.send("GET /stream/\(total) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try client.readHead()
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), String(total))
        XCTAssertNil(head.header("Transfer-Encoding"))
        try client.discard(total) { _ in peak = max(peak, Self.peakResidentBytes()) }
        // Kept alive: the next request on the same connection is answered.
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "ok")
        XCTAssertLessThan(peak - before, 16 << 20, "RSS grew by \(peak - before) bytes for a \(total)-byte answer")
    }

    func testFiftyMegabyteChunkedStreamCompletesInBoundedMemory() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        let total = 50 << 20 + 12_345
        let before = try XCTUnwrap(Self.residentBytes(), "/proc/self/status has no VmRSS: memory cannot be measured")
        var peak = before
        try client.send("GET /stream/\(total)?chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try client.readHead()
        XCTAssertEqual(head.header("Transfer-Encoding"), "chunked")
        XCTAssertNil(head.header("Content-Length"))
        let received = try client.discardChunkedBody { count in
            if count % (1 << 20) < Self.chunkSize { peak = max(peak, Self.peakResidentBytes()) }
        }
        XCTAssertEqual(received, total)
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "ok")
        XCTAssertLessThan(peak - before, 16 << 20, "RSS grew by \(peak - before) bytes for a \(total)-byte answer")
    }

    func testPipelinedRequestsAfterAStreamAreAnsweredInOrder() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send(
            "GET /stream/300000?chunked=1 HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\nGET /stream/200000 HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        _ = try client.readHead()
        XCTAssertEqual(try client.discardChunkedBody(), 300_000)
        XCTAssertEqual(try client.readResponse().text, "ok")
        XCTAssertEqual(try client.readResponse().body.count, 200_000)
        XCTAssertEqual(try client.readResponse().text, "ok")
    }

    func testHeadOfAStreamSendsNoBodyAndDoesNotPull() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("HEAD /stream/5000 HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        let head = try client.readResponse(headRequest: true)
        XCTAssertEqual(head.header("Content-Length"), "5000")
        XCTAssertEqual(try client.readResponse().text, "ok")
        XCTAssertEqual(pulls.load(), 0)
    }

    func testHTTP10StreamOfUnknownLengthEndsWithTheConnection() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /stream/100000?chunked=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let head = try client.readHead()
        XCTAssertNil(head.header("Transfer-Encoding"))
        XCTAssertNil(head.header("Content-Length"))
        XCTAssertEqual(head.header("Connection"), "close")
        XCTAssertEqual(client.readUntilClosed().utf8.count, 100_000)
    }

    func testErrorMidStreamClosesTheConnectionAndTheServerKeepsServing() throws {
        let server = try startServer()
        let chunked = try HTTPTestClient(port: server.port)
        try chunked.send("GET /stream/1000000?chunked=1&fail=131072 HTTP/1.1\r\n\r\n")
        _ = try chunked.readHead()
        XCTAssertThrowsError(try chunked.discardChunkedBody(), "no last chunk: the client sees the failure")
        let sized = try HTTPTestClient(port: server.port)
        try sized.send("GET /stream/1000000?fail=131072 HTTP/1.1\r\n\r\n")
        _ = try sized.readHead()
        XCTAssertThrowsError(try sized.discard(1_000_000))
        let short = try HTTPTestClient(port: server.port)
        try short.send("GET /short HTTP/1.1\r\n\r\n")
        _ = try short.readHead()
        XCTAssertThrowsError(try short.discard(10))
        let other = try HTTPTestClient(port: server.port)
        try other.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try other.readResponse().text, "ok")
    }

    // MARK: - Slow readers

    func testStreamPausesForAReaderThatStopsAndIsClosedAtTheDeadline() throws {
        let server = try startServer { $0.slowReaderTimeout = .seconds(3) }
        let client = try HTTPTestClient(port: server.port)
        let started = Date()
        try client.send("GET /stream/\(50 << 20)?chunked=1 HTTP/1.1\r\n\r\n")
        _ = try client.readHead()
        // The client reads nothing more: the producer stops once the socket and the queue are full.
        XCTAssertTrue(waitUntil(seconds: 5) { pulls.load() > 4 })
        // Kept: a window: the producer settles, then must not pull for a whole second.
        Thread.sleep(forTimeInterval: 0.5)
        let paused = pulls.load()
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(pulls.load(), paused, "next() is not called while the reader is stuck")
        // What the kernel's socket buffers hold, plus the low-water mark and a chunk.
        XCTAssertLessThan(paused * Self.chunkSize, 16 << 20, "the producer ran ahead by \(paused) chunks")
        XCTAssertEqual(server.openConnections(), 1, "paused, not disconnected, before the deadline")
        XCTAssertTrue(waitUntil(seconds: 5) { server.openConnections() == 0 }, "the stuck reader is disconnected")
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertGreaterThan(elapsed, 2.9)
        XCTAssertLessThan(elapsed, 4.5)
        XCTAssertEqual(pulls.load(), paused)
    }

    func testClientThatSendsRequestsButNeverReadsIsClosedAtTheDeadline() throws {
        let server = try startServer { $0.slowReaderTimeout = .seconds(2) }
        let client = try HTTPTestClient(port: server.port, timeoutSeconds: 1)
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertTrue(waitUntil(seconds: 2) { server.openConnections() == 1 })
        let started = Date()
        var closedAt: Date?
        // Keeps sending requests (each answered with 1 MiB it never reads) every 100 ms.
        while Date().timeIntervalSince(started) < 10 {
            do {
                try client.send("GET /megabyte HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
            } catch {
                closedAt = Date()
                break
            }
            if server.openConnections() == 0 {
                closedAt = Date()
                break
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let elapsed = try XCTUnwrap(closedAt, "a client that never reads stays connected").timeIntervalSince(started)
        XCTAssertGreaterThan(elapsed, 1.9, "closed before the deadline")
        XCTAssertLessThan(elapsed, 5, "closed after \(elapsed) s with a 2 s deadline")
        XCTAssertTrue(waitUntil(seconds: 2) { server.openConnections() == 0 })
        let other = try HTTPTestClient(port: server.port)
        try other.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try other.readResponse().text, "ok")
    }

    func testSlowButSteadyReaderIsNotClosed() throws {
        let server = try startServer { $0.slowReaderTimeout = .seconds(1) }
        let client = try HTTPTestClient(port: server.port)
        let total = 16 << 20
        try client.send("GET /stream/\(total) HTTP/1.1\r\n\r\n")
        _ = try client.readHead()
        // 3 s of reading at ~5 MiB/s: queued output moves within every second.
        var read = 0
        while read < total {
            let step = min(256 << 10, total - read)
            try client.discard(step)
            read += step
            Thread.sleep(forTimeInterval: 0.05)
        }
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "ok")
    }
}
