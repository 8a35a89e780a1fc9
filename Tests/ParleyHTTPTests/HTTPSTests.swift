import Foundation
import ParleyNet
import ParleyTestSupport
import Synchronization
import XCTest
@testable import ParleyHTTP

/// HTTPS over real sockets: Parley's TLS listener with Parley's client, the client against
/// Python `ssl` servers with bad certificates, and the listener against slow or garbage peers.
final class HTTPSTests: XCTestCase {
    private var group: EventLoopGroup!
    private var authority: TestCertificateAuthority!

    override func setUpWithError() throws {
        // One loop, so consecutive requests from the test share the loop's connection pool.
        group = try EventLoopGroup(threads: 1)
        authority = try TestCertificateAuthority()
    }

    override func tearDown() {
        group.shutdownGracefully()
    }

    private func makeServer(handshakeTimeout: Duration = .seconds(10)) throws -> HTTPServer {
        let leaf = try authority.issue(name: "localhost", alsoNames: ["127.0.0.1"])
        let tls = try TLSServerContext(certificates: [.init(chainFile: leaf.certificate, keyFile: leaf.key)], handshakeTimeout: handshakeTimeout)
        let router = Router()
        router.get("/hello") { _, _ in HTTPResponse(body: "hello over tls") }
        router.get("/big") { _, _ in HTTPResponse(body: [UInt8](repeating: 0x61, count: 3 << 20)) }
        router.post("/echo") { request, _ in HTTPResponse(body: request.body) }
        let server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0, tls: tls), router: router)
        try server.start()
        return server
    }

    private func client(caFile: String? = nil) -> HTTPClient {
        HTTPClient(group: group, configuration: .init(connectTimeout: .seconds(3), requestTimeout: .seconds(10),
                                                      responseLimits: .init(maxBodyBytes: 8 << 20), tlsCAFile: caFile ?? authority.caCertificate))
    }

    func testParleyClientAndServerOverTLSKeepAliveLargeBodies() async throws {
        let server = try makeServer()
        defer { server.closeAll() }
        XCTAssertEqual(server.tlsPort, server.port)
        let client = client()
        for host in ["localhost", "127.0.0.1"] {
            let response = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://\(host):\(server.port)/hello")!))
            XCTAssertEqual(response.status, .ok)
            XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "hello over tls")
        }
        let again = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(server.port)/hello")!))
        XCTAssertEqual(again.status, .ok)
        let idle = await client.idleConnectionCount()
        XCTAssertEqual(idle, 2, "one kept-alive TLS connection per origin")
        let big = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(server.port)/big")!))
        XCTAssertEqual(big.body.count, 3 << 20)
        let body = (0..<(700 * 1024)).map { UInt8($0 % 251) }
        let echoed = try await client.execute(HTTPClientRequest(method: .post, url: HTTPClientURL("https://localhost:\(server.port)/echo")!, body: body))
        XCTAssertEqual(echoed.body, body)
        client.shutdown()
    }

    private func expectTLSFailure(_ client: HTTPClient, _ url: String, containing reason: String,
                                  file: StaticString = #filePath, line: UInt = #line) async {
        do {
            let response = try await client.execute(HTTPClientRequest(url: HTTPClientURL(url)!))
            XCTFail("\(url): expected a TLS failure, got \(response.status)", file: file, line: line)
        } catch {
            guard case .tls(.verificationFailed(let text)) = error else {
                return XCTFail("\(url): expected verificationFailed, got \(error)", file: file, line: line)
            }
            XCTAssertTrue(text.contains(reason), "\(text)", file: file, line: line)
        }
    }

    func testClientRefusesExpiredWrongNameAndSelfSignedPythonServers() async throws {
        let good = try authority.issue(name: "localhost")
        let goodServer = try PythonStandIn(script: "tls_standin.py", arguments: [good.certificate, good.key])
        defer { goodServer.stop() }
        let client = client()
        let ok = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(goodServer.port)/jwks")!))
        XCTAssertEqual(String(decoding: ok.body, as: UTF8.self), "ok /jwks")

        let cases: [((certificate: String, key: String), String)] = [
            (try authority.issue(name: "localhost", expired: true), "expired"),
            (try authority.issue(name: "other.parley.test"), "mismatch"),
            (try authority.issue(name: "localhost", selfSigned: true), "self-signed"),
        ]
        for (leaf, reason) in cases {
            let server = try PythonStandIn(script: "tls_standin.py", arguments: [leaf.certificate, leaf.key])
            await expectTLSFailure(client, "https://localhost:\(server.port)/", containing: reason)
            server.stop()
        }
        // The system store does not know the test CA: refused, not downgraded.
        let system = HTTPClient(group: group, configuration: .init(connectTimeout: .seconds(3)))
        await expectTLSFailure(system, "https://localhost:\(goodServer.port)/", containing: "local issuer")
        // A plain-HTTP server behind an https URL is a handshake failure, never a clear-text request.
        let hits = Atomic<Int>(0)
        let router = Router()
        router.get("/secret") { _, _ in
            hits.add(1, ordering: .relaxed)
            return HTTPResponse(body: "leaked")
        }
        let plain = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0), router: router)
        try plain.start()
        defer { plain.closeAll() }
        do {
            _ = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(plain.port)/secret")!))
            XCTFail("https to a plain server answered")
        } catch {
            guard case .tls = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(hits.load(ordering: .relaxed), 0, "the request never went out in clear")
        client.shutdown()
        system.shutdown()
    }

    func testHandshakeDeadlineAndGarbageCloseTheConnectionAndTheServerKeepsServing() async throws {
        let server = try makeServer(handshakeTimeout: .milliseconds(400))
        defer { server.closeAll() }
        // Silent after connect, and a partial ClientHello (a slow handshake): both cut.
        for prefix in [[UInt8](), [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]] {
            let socket = try HTTPTestClient(port: server.port)
            if !prefix.isEmpty { try socket.send(prefix) }
            let started = Date()
            XCTAssertFalse(socket.closedWithin(seconds: 0.25), "open before the deadline")
            XCTAssertTrue(socket.closedWithin(seconds: 2), "closed by the handshake deadline")
            XCTAssertLessThan(Date().timeIntervalSince(started), 2.5)
        }
        // Plain HTTP on the TLS port: an alert and a close, never an HTTP answer.
        do {
            let socket = try HTTPTestClient(port: server.port)
            try socket.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertFalse(socket.readUntilClosed().contains("HTTP/1.1"))
        }
        XCTAssertTrue(WaitUntil.holds { server.openConnections() == 0 }, "the cut connections are gone: \(server.openConnections()) open")
        let client = client()
        let response = try await client.execute(HTTPClientRequest(url: HTTPClientURL("https://localhost:\(server.port)/hello")!))
        XCTAssertEqual(response.status, .ok)
        client.shutdown()
    }
}
