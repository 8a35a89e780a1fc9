#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ParleyHTTP
@testable import ParleyKit
import ParleyKitLinux
import ParleyNet
import ParleyTestSupport
import XCTest

/// The Linux transports over TLS, real sockets: a `parley serve` with a test CA's certificates
/// (REST over https, the socket over wss), and peers whose certificates must be refused.
final class TLSTransportTests: XCTestCase {
    private var authority: TestCertificateAuthority!

    override func setUpWithError() throws {
        authority = try TestCertificateAuthority()
    }

    func testSignUpLogInAndMessagesOverHTTPSAndWSSWithSNIAndRefusalsOfTheSameServer() async throws {
        // The first certificate is for another name: only a client that sends SNI `localhost`
        // gets the second one (no SNI gets the first).
        let other = try authority.issue(name: "chat.parley.test")
        let local = try authority.issue(name: "localhost")
        let harness = try SDKHarness(serverArguments: ["--tls-cert", "\(other.certificate),\(local.certificate)",
                                                       "--tls-key", "\(other.key),\(local.key)", "--tls-port", "0"])
        let tlsPort = try await Self.tlsPort(of: harness.server)
        let server = ParleyServerURL("https://localhost:\(tlsPort)")!
        let http = LinuxHTTPTransport(group: harness.group, blockingPool: harness.pool, tlsCAFile: authority.caCertificate)

        // Accounts over https: sign up, then log in with the password.
        let alice = try await Self.signUp("alice", over: http, to: server)
        let bob = try await Self.signUp("bob", over: http, to: server)
        let login = try await http.send(Self.parseRequest("POST", "/parse/login", json: "{\"username\":\"bob\",\"password\":\"secret-bob\"}"), to: server)
        XCTAssertEqual(login.status, 200, String(decoding: login.body, as: UTF8.self))
        let bobToken = try XCTUnwrap(Self.json(login.body)["sessionToken"] as? String)

        // Messages over wss, REST history over https.
        let transport = LinuxTransport(group: harness.group, blockingPool: harness.pool, tlsCAFile: authority.caCertificate)
        let (alicePhone, aliceLog) = client(harness, "alice-phone", server: server, transport: transport, http: http)
        let (bobPhone, bobLog) = client(harness, "bob-phone", server: server, transport: transport, http: http)
        try await harness.connect(alicePhone, aliceLog, as: alice)
        try await harness.connect(bobPhone, bobLog, as: SDKHarness.User(id: bob.id, token: bobToken, name: "bob"))
        let large = String(repeating: "tls ", count: 5000)
        let first = try await alicePhone.sendAndWait(OutgoingMessage(to: [bob.id], text: large))
        // A flood over one TLS connection arrives whole and in order.
        let flood = (0..<200).map { "flood \($0)" }
        for text in flood { _ = try await alicePhone.send(OutgoingMessage(to: [bob.id], text: text)) }
        let allArrived = await bobLog.waitUntil { $0.messageTexts == [large] + flood }
        let texts = await bobLog.messageTexts
        XCTAssertTrue(allArrived, "\(texts.count) messages: \(texts.suffix(3))")
        let reply = try await bobPhone.sendAndWait(OutgoingMessage(to: [alice.id], text: "hi alice over wss"))
        let replied = await aliceLog.waitUntil { $0.messageTexts == ["hi alice over wss"] }
        XCTAssertTrue(replied)
        let history = try await bobPhone.rest().history(with: alice.id, limit: 5)
        XCTAssertEqual(history.first?.messageId, reply.messageId)
        XCTAssertFalse(first.messageId.isEmpty)

        // The numeric host sends no SNI, so it gets the other name's certificate: refused.
        let numeric = ParleyServerURL("https://127.0.0.1:\(tlsPort)")!
        await expectTLSRefusal(http, numeric, containing: "mismatch")
        // The system store does not know the test CA: refused on both paths, never downgraded.
        let system = LinuxHTTPTransport(group: harness.group, blockingPool: harness.pool)
        await expectTLSRefusal(system, server, containing: "local issuer")
        let (untrusting, untrustingLog) = client(harness, "alice-untrusting", server: server,
                                                 transport: LinuxTransport(group: harness.group, blockingPool: harness.pool), http: system)
        await expectSocketRefusal(untrusting, untrustingLog, token: alice.token, containing: "local issuer")
        // A CA file that cannot be read is a configuration refusal, not a fallback to the store.
        let (misconfigured, misconfiguredLog) = client(harness, "alice-misconfigured", server: server,
                                                       transport: LinuxTransport(group: harness.group, blockingPool: harness.pool,
                                                                                 tlsCAFile: authority.directory.path + "/missing.pem"), http: http)
        await expectSocketRefusal(misconfigured, misconfiguredLog, token: alice.token, containing: "cannot load CA certificates")

        // No valid session over wss: the server's 4004 comes through TLS as `invalidSession`.
        let (stranger, strangerLog) = client(harness, "stranger", server: server, transport: transport, http: http)
        await stranger.setDelegate(strangerLog)
        try await stranger.connect(sessionToken: "r:not-a-session")
        do {
            try await stranger.waitUntilConnected(timeout: .seconds(20))
            XCTFail("a bogus session connected")
        } catch {
            XCTAssertEqual(error, .invalidSession)
        }

        // The plain port behind an https URL: a TLS refusal at once, nothing sent in clear.
        let plain = ParleyServerURL("https://localhost:\(harness.port)")!
        let started = ContinuousClock.now
        await expectTLSRefusal(http, plain, containing: "handshake failed")
        let (confused, confusedLog) = client(harness, "alice-confused", server: plain, transport: transport, http: http)
        await expectSocketRefusal(confused, confusedLog, token: alice.token, containing: "handshake failed")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "refused at once, not at a deadline")
        for client in [alicePhone, bobPhone, untrusting, misconfigured, stranger, confused] { await client.shutdown() }
        let ready = try TestHTTPClient(port: harness.port).request("GET", "/ready")
        XCTAssertEqual(ready.status, 200, "the server keeps serving")
    }

    func testRefusesExpiredWrongNameAndSelfSignedCertificatesAndASilentPeerCannotHang() async throws {
        let group = try EventLoopGroup(threads: 1)
        let pool = try BlockingPool(threads: 1)
        defer {
            group.shutdownGracefully()
            pool.shutdown()
        }
        let root = NSTemporaryDirectory() + "parleykit-tls-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let http = LinuxHTTPTransport(client: HTTPClient(group: group, configuration: .init(connectTimeout: .seconds(1), requestTimeout: .seconds(5),
                                                                                             tlsCAFile: authority.caCertificate), blockingPool: pool))
        let transport = LinuxTransport(group: group, blockingPool: pool, connectTimeout: .seconds(1), tlsCAFile: authority.caCertificate)
        func makeClient(_ device: String, _ server: ParleyServerURL) -> (ParleyClient, EventRecorder) {
            var configuration = ParleyClientConfiguration(serverURL: server, deviceId: device)
            configuration.backoff = ReconnectBackoff(baseMilliseconds: 100, capMilliseconds: 500)
            let storage = FileStorage(directory: root + "/" + device, runner: BlockingPoolRunner(pool: pool))
            return (ParleyClient(configuration: configuration, transport: transport, storage: storage, http: http), EventRecorder())
        }

        // The stand-in with a good certificate answers: the refusals below are the certificates'.
        let good = try authority.issue(name: "localhost")
        let goodServer = try PythonStandIn(script: "tls_standin.py", arguments: [good.certificate, good.key])
        defer { goodServer.stop() }
        let answer = try await http.send(ParleyHTTPRequest(method: "GET", target: "/v1/turn"), to: ParleyServerURL("https://localhost:\(goodServer.port)")!)
        XCTAssertEqual(String(decoding: answer.body, as: UTF8.self), "ok /v1/turn")
        let offered = try await http.send(ParleyHTTPRequest(method: "GET", target: "/tls"), to: ParleyServerURL("https://localhost:\(goodServer.port)")!)
        XCTAssertEqual(String(decoding: offered.body, as: UTF8.self), "alpn=http/1.1 sni=localhost", "ALPN and SNI as the peer saw them")

        let cases: [((certificate: String, key: String), String)] = [
            (try authority.issue(name: "localhost", expired: true), "certificate has expired"),
            (try authority.issue(name: "other.parley.test"), "hostname mismatch"),
            (try authority.issue(name: "localhost", selfSigned: true), "self-signed certificate"),
        ]
        for (index, (leaf, reason)) in cases.enumerated() {
            let standIn = try PythonStandIn(script: "tls_standin.py", arguments: [leaf.certificate, leaf.key])
            let server = ParleyServerURL("https://localhost:\(standIn.port)")!
            await expectTLSRefusal(http, server, containing: "certificate verification failed: " + reason)
            let (client, log) = makeClient("device-\(index)", server)
            await expectSocketRefusal(client, log, token: "r:any", containing: "certificate verification failed: " + reason)
            await client.shutdown()
            standIn.stop()
        }

        // A peer that accepts TCP and never answers the hello: the deadline ends the attempt
        // (REST fails, the socket waits to reconnect), nothing hangs and nothing goes out in clear.
        let silent = try SilentListener()
        defer { silent.close() }
        let server = ParleyServerURL("https://localhost:\(silent.port)")!
        let started = ContinuousClock.now
        await expectTLSRefusal(http, server, containing: "no handshake within")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(4))
        let (client, log) = makeClient("device-silent", server)
        await client.setDelegate(log)
        try await client.connect(sessionToken: "r:any")
        let retrying = await log.waitUntil(timeout: .seconds(10)) { recorder in
            recorder.states.contains { if case .waitingToReconnect = $0 { true } else { false } }
        }
        XCTAssertTrue(retrying, "a silent peer is a dropped attempt (retried), not a TLS refusal")
        let stopped = await log.states.contains { if case .stopped = $0 { true } else { false } }
        XCTAssertFalse(stopped)
        await client.shutdown()
    }

    // MARK: Helpers

    private func client(_ harness: SDKHarness, _ device: String, server: ParleyServerURL, transport: LinuxTransport,
                        http: LinuxHTTPTransport) -> (ParleyClient, EventRecorder) {
        var configuration = ParleyClientConfiguration(serverURL: server, deviceId: device, ackDelayMilliseconds: 20)
        configuration.backoff = ReconnectBackoff(baseMilliseconds: 100, capMilliseconds: 1000)
        let storage = FileStorage(directory: harness.root + "/" + device, runner: BlockingPoolRunner(pool: harness.pool))
        return (ParleyClient(configuration: configuration, transport: transport, storage: storage, http: http), EventRecorder())
    }

    private func expectTLSRefusal(_ http: LinuxHTTPTransport, _ server: ParleyServerURL, containing reason: String,
                                  file: StaticString = #filePath, line: UInt = #line) async {
        do {
            let response = try await http.send(ParleyHTTPRequest(method: "GET", target: "/health"), to: server)
            XCTFail("\(server): expected a TLS refusal, got \(response.status)", file: file, line: line)
        } catch {
            guard case .tls(let text) = error else { return XCTFail("\(server): expected .tls, got \(error)", file: file, line: line) }
            XCTAssertTrue(text.contains(reason), "\(error)", file: file, line: line)
            XCTAssertTrue(error.description.hasPrefix("TLS "), error.description, file: file, line: line)
        }
    }

    /// The client stops with `.tls` (close 1015 from the transport) instead of retrying.
    private func expectSocketRefusal(_ client: ParleyClient, _ log: EventRecorder, token: String, containing reason: String,
                                     file: StaticString = #filePath, line: UInt = #line) async {
        await client.setDelegate(log)
        do {
            try await client.connect(sessionToken: token)
            try await client.waitUntilConnected(timeout: .seconds(20))
            XCTFail("expected a TLS refusal, connected", file: file, line: line)
        } catch {
            guard case .tls(let text) = error else { return XCTFail("expected .tls, got \(error)", file: file, line: line) }
            XCTAssertTrue(text.contains(reason), "\(error)", file: file, line: line)
        }
        // The delegate hears of it after `waitUntilConnected` has thrown: wait for it.
        let stopped = await log.waitUntil(timeout: .seconds(10)) { recorder in
            if case .stopped(.tls?)? = recorder.states.last { true } else { false }
        }
        let states = await log.states
        XCTAssertTrue(stopped, "\(states)", file: file, line: line)
    }

    private static func parseRequest(_ method: String, _ target: String, json: String) -> ParleyHTTPRequest {
        ParleyHTTPRequest(method: method, target: target, headers: [("X-Parse-Application-Id", "parley"), ("Content-Type", "application/json")],
                          body: Array(json.utf8))
    }

    private static func json(_ body: [UInt8]) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }

    private static func signUp(_ name: String, over http: LinuxHTTPTransport, to server: ParleyServerURL) async throws -> SDKHarness.User {
        let response = try await http.send(parseRequest("POST", "/parse/users", json: "{\"username\":\"\(name)\",\"password\":\"secret-\(name)\"}"),
                                           to: server)
        XCTAssertEqual(response.status, 201, String(decoding: response.body, as: UTF8.self))
        let object = try json(response.body)
        return SDKHarness.User(id: try XCTUnwrap(object["objectId"] as? String), token: try XCTUnwrap(object["sessionToken"] as? String), name: name)
    }

    /// The TLS port the server logged once listening (`--tls-port 0`).
    private static func tlsPort(of server: ParleyServerProcess) async throws -> Int {
        for _ in 0..<100 {
            if let match = server.log.firstMatch(of: /tls_port\W+(\d+)/), let port = Int(match.1) { return port }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("no tls_port in the log:\n\(server.log)")
        throw CancellationError()
    }
}

/// A listening socket that never accepts: the kernel completes the TCP handshake, then nothing.
private final class SilentListener: @unchecked Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(fd) }
}
