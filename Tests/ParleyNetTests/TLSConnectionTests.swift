import XCTest
@testable import ParleyNet
import ParleyTestSupport

final class TLSConnectionTests: XCTestCase {
    /// Moves records between the two sessions until neither has output; returns what each decrypted.
    private func pump(_ client: TLSConnection, _ server: TLSConnection) throws -> (client: [UInt8], server: [UInt8]) {
        var atClient: [UInt8] = []
        var atServer: [UInt8] = []
        for _ in 0..<20 {
            let toServer = client.takeOutput()
            if !toServer.isEmpty { atServer += try server.receive(toServer) }
            let toClient = server.takeOutput()
            if !toClient.isEmpty { atClient += try client.receive(toClient) }
            if toServer.isEmpty && toClient.isEmpty { break }
        }
        return (atClient, atServer)
    }

    func testHandshakeAndRecordsBothWaysWithALPN() throws {
        let authority = try TestCertificateAuthority()
        let leaf = try authority.issue(name: "api.parley.test")
        let server = try TLSConnection(context: .server(certificateChainFile: leaf.certificate, privateKeyFile: leaf.key))
        let client = try TLSConnection(context: .client(caFile: authority.caCertificate), serverName: "api.parley.test")
        try client.send(Array("GET /health HTTP/1.1\r\n\r\n".utf8))
        try client.start()
        var received = try pump(client, server)
        XCTAssertEqual(client.state, .established)
        XCTAssertEqual(server.state, .established)
        XCTAssertEqual(client.negotiatedProtocol, "http/1.1")
        XCTAssertEqual(server.protocolVersion, "TLSv1.3")
        XCTAssertEqual(String(decoding: received.server, as: UTF8.self), "GET /health HTTP/1.1\r\n\r\n")
        try server.send(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        received = try pump(client, server)
        XCTAssertEqual(String(decoding: received.client, as: UTF8.self), "HTTP/1.1 200 OK\r\n\r\n")
        server.shutdown()
        _ = try client.receive(server.takeOutput())
        XCTAssertEqual(client.state, .closed)
    }

    private func assertClientRefuses(_ leaf: (certificate: String, key: String), name: String, caFile: String,
                                     reason: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let server = try TLSConnection(context: .server(certificateChainFile: leaf.certificate, privateKeyFile: leaf.key))
        let client = try TLSConnection(context: .client(caFile: caFile), serverName: name)
        try client.start()
        XCTAssertThrowsError(try pump(client, server), file: file, line: line) { error in
            guard case TLSError.verificationFailed(let text) = error else {
                return XCTFail("expected verificationFailed, got \(error)", file: file, line: line)
            }
            XCTAssertTrue(text.contains(reason), "\(text)", file: file, line: line)
        }
        XCTAssertEqual(client.state.isFailed, true, file: file, line: line)
    }

    func testClientRefusesWrongNameExpiredAndSelfSigned() throws {
        let authority = try TestCertificateAuthority()
        try assertClientRefuses(try authority.issue(name: "other.parley.test"), name: "api.parley.test",
                                caFile: authority.caCertificate, reason: "mismatch")
        try assertClientRefuses(try authority.issue(name: "api.parley.test", expired: true), name: "api.parley.test",
                                caFile: authority.caCertificate, reason: "expired")
        try assertClientRefuses(try authority.issue(name: "api.parley.test", selfSigned: true), name: "api.parley.test",
                                caFile: authority.caCertificate, reason: "self-signed")
    }

    func testSystemStoreDoesNotTrustTheTestCA() throws {
        let authority = try TestCertificateAuthority()
        let leaf = try authority.issue(name: "api.parley.test")
        let server = try TLSConnection(context: .server(certificateChainFile: leaf.certificate, privateKeyFile: leaf.key))
        let client = try TLSConnection(context: .client(), serverName: "api.parley.test")
        try client.start()
        XCTAssertThrowsError(try pump(client, server)) { error in
            guard case TLSError.verificationFailed = error else { return XCTFail("\(error)") }
        }
    }

    func testGarbageFromClientFailsTheHandshakeWithATypedError() throws {
        let authority = try TestCertificateAuthority()
        let leaf = try authority.issue(name: "api.parley.test")
        let server = try TLSConnection(context: .server(certificateChainFile: leaf.certificate, privateKeyFile: leaf.key))
        XCTAssertThrowsError(try server.receive(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))) { error in
            guard case TLSError.handshakeFailed = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try server.receive([0x16])) { error in
            guard case TLSError.handshakeFailed = error else { return XCTFail("\(error)") }
        }
    }

    func testPlaintextQueuedBeforeTheHandshakeIsBounded() throws {
        let client = try TLSConnection(context: .client(), serverName: "api.parley.test")
        try client.send([UInt8](repeating: 1, count: TLSConnection.maximumBufferedBytes - 10))
        XCTAssertThrowsError(try client.send([UInt8](repeating: 1, count: 100))) { error in
            XCTAssertEqual(error as? TLSError, .bufferFull)
        }
    }

    func testMissingKeyIsAConfigurationError() throws {
        XCTAssertThrowsError(try TLSContext.server(certificateChainFile: "/nonexistent.pem", privateKeyFile: "/nonexistent.key")) { error in
            guard case TLSError.configuration = error else { return XCTFail("\(error)") }
        }
    }
}

extension TLSConnection.State {
    var isFailed: Bool { if case .failed = self { true } else { false } }
}
