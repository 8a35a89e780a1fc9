import Foundation
import Glibc
import ParleyNet
import ParleyTestSupport
import Synchronization
import XCTest
@testable import ParleyHTTP

/// `HTTPResponseBody.file` over real sockets: `sendfile` on plain connections (the fallback
/// stream never pulled), the fallback stream over TLS, and a file shorter than its region.
final class HTTPFileBodyTests: XCTestCase {
    private var group: EventLoopGroup!
    private var path = ""
    private var bytes: [UInt8] = []
    final class Counter: Sendable { let value = Atomic<Int>(0) }
    private let counter = Counter()

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 1)
        path = NSTemporaryDirectory() + "parley-file-body-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // 20 MiB: more than the socket buffers take, so the sender waits for room many times.
        bytes = [UInt8](repeating: 0, count: 20 << 20)
        bytes.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
        }
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    }

    override func tearDown() {
        group.shutdownGracefully()
        unlink(path)
    }

    private func router() -> Router {
        let router = Router()
        let path = self.path, bytes = self.bytes, counter = self.counter
        router.get("/file/:from/:to") { _, context in
            let from = Int(context.parameters["from"] ?? "") ?? 0, to = Int(context.parameters["to"] ?? "") ?? 0
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            let offset = Mutex(from)
            // The TLS fallback: the same bytes from memory, 256 KiB per pull.
            let fallback: @Sendable () async throws -> [UInt8]? = {
                counter.value.add(1, ordering: .relaxed)
                let start = offset.withLock { $0 }
                guard start < to else { return nil }
                let end = min(to, start + (256 << 10))
                offset.withLock { $0 = end }
                return Array(bytes[start..<end])
            }
            return HTTPResponse(headers: ["Content-Type": "application/octet-stream"], body: .file(FileRegion(fd: fd, range: from..<to), fallback: fallback))
        }
        router.get("/hello") { _, _ in HTTPResponse(body: "hello") }
        return router
    }

    private func client(caFile: String? = nil) -> HTTPClient {
        HTTPClient(group: group, configuration: .init(connectTimeout: .seconds(3), requestTimeout: .seconds(30),
                                                      responseLimits: .init(maxBodyBytes: 32 << 20), tlsCAFile: caFile))
    }

    func testPlainConnectionsSendTheRegionWithSendfileAndStayKeptAlive() async throws {
        let server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0), router: router())
        try server.start()
        defer { server.closeAll() }
        let client = client()
        defer { client.shutdown() }
        let whole = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(server.port)/file/0/\(bytes.count)")!))
        XCTAssertEqual(whole.status, .ok)
        XCTAssertEqual(whole.headers["Content-Length"], String(bytes.count))
        XCTAssertTrue(whole.body == bytes, "the whole file, byte for byte")
        let part = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(server.port)/file/1000/5000")!))
        XCTAssertEqual(part.body, Array(bytes[1000..<5000]))
        let hello = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(server.port)/hello")!))
        XCTAssertEqual(String(decoding: hello.body, as: UTF8.self), "hello")
        let idle = await client.idleConnectionCount()
        XCTAssertEqual(idle, 1, "one kept-alive connection carried all three")
        XCTAssertEqual(counter.value.load(ordering: .relaxed), 0, "sendfile: the fallback stream is never pulled")
    }

    func testTLSConnectionsPullTheFallbackStream() async throws {
        let authority = try TestCertificateAuthority()
        let leaf = try authority.issue(name: "localhost", alsoNames: ["127.0.0.1"])
        let tls = try TLSServerContext(certificates: [.init(chainFile: leaf.certificate, keyFile: leaf.key)], handshakeTimeout: .seconds(10))
        let server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0, tls: tls), router: router())
        try server.start()
        defer { server.closeAll() }
        let client = client(caFile: authority.caCertificate)
        defer { client.shutdown() }
        let response = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(server.port)/file/7/\(3 << 20)")!))
        XCTAssertEqual(response.status, .ok)
        XCTAssertTrue(response.body == Array(bytes[7..<(3 << 20)]), "the region's bytes, encrypted")
        XCTAssertGreaterThan(counter.value.load(ordering: .relaxed), 10, "TLS: the bytes came from the fallback stream")
    }

    func testAFileShorterThanItsRegionClosesTheConnectionAndTheServerKeepsServing() async throws {
        let server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0), router: router())
        try server.start()
        defer { server.closeAll() }
        let client = client()
        defer { client.shutdown() }
        do {
            _ = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(server.port)/file/0/\(bytes.count + 100)")!))
            XCTFail("a truncated body must not complete")
        } catch {
            XCTAssertEqual(error, .connectionClosed)
        }
        let hello = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(server.port)/hello")!))
        XCTAssertEqual(String(decoding: hello.body, as: UTF8.self), "hello")
    }
}
