import Foundation
@testable import ParleyMail
import ParleyNet
import ParleyTestSupport
import XCTest

/// Deliveries over real sockets to the aiosmtpd stand-in.
final class SMTPClientTests: XCTestCase {
    var smtp: SMTPStandIn!
    var group: EventLoopGroup!

    override func setUp() async throws {
        smtp = try SMTPStandIn()
        group = try EventLoopGroup(threads: 1)
    }

    override func tearDown() async throws {
        group.shutdownGracefully()
        smtp.stop()
    }

    func client(credentials: SMTPCredentials? = nil, insecure: Bool = false, port: Int? = nil, timeout: Duration = .seconds(5)) -> SMTPClient {
        SMTPClient(group: group, configuration: .init(host: "127.0.0.1", port: port ?? smtp.smtpPort, security: .none, credentials: credentials,
                                                      allowInsecureAuthentication: insecure, heloName: "parley.test", connectTimeout: .seconds(2),
                                                      commandTimeout: timeout, deliveryTimeout: timeout * 2))
    }

    /// The error `deliver` fails with (nil, with a failed assertion, when it delivers).
    func failure(_ client: SMTPClient, to recipient: String = "user@example.org", _ what: String,
                 file: StaticString = #filePath, line: UInt = #line) async throws -> SMTPError? {
        let bytes = try message(text: "x")
        do {
            _ = try await client.deliver(bytes, from: "app@example.com", to: recipient)
            XCTFail("\(what): delivered", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func message(subject: String = "Grüße", text: String) throws -> [UInt8] {
        try MailMessage(from: MailAddress("app@example.com", name: "Parley App"), to: MailAddress("user@example.org"), subject: subject,
                        text: text, html: "<p>\(text)</p>").rendered(id: 1, createdAt: 1_700_000_000_000, boundary: "bnd")
    }

    func testDeliveryWithDotStuffing() async throws {
        let text = "first line\n.\n.hidden line\nlast line"
        let reply = try await client().deliver(try message(text: text), from: "app@example.com", to: "user@example.org")
        XCTAssertEqual(reply.code, 250)
        let received = try smtp.messages()
        XCTAssertEqual(received.count, 1)
        XCTAssertEqual(received.first?.from, "app@example.com")
        XCTAssertEqual(received.first?.to, ["user@example.org"])
        let data = received.first?.data ?? ""
        // The server removed the stuffing: the lines starting with a dot arrive intact, and the
        // message did not end at the lone dot.
        XCTAssertTrue(data.contains("first line\r\n.\r\n.hidden line\r\nlast line"), data)
        XCTAssertTrue(data.contains("--bnd--"), "the whole message arrived")
        XCTAssertTrue(data.contains("Subject: =?UTF-8?B?"), data)
    }

    func testAuthPlainAndLogin() async throws {
        try smtp.configure(["auth": ["mailer": "s3cret"]])
        let reply = try await client(credentials: SMTPCredentials(username: "mailer", password: "s3cret"), insecure: true)
            .deliver(try message(text: "hi"), from: "app@example.com", to: "user@example.org")
        XCTAssertEqual(reply.code, 250)
        let wrong = try await failure(client(credentials: SMTPCredentials(username: "mailer", password: "wrong"), insecure: true), "wrong password")
        guard case .authenticationFailed? = wrong else { return XCTFail("\(String(describing: wrong))") }
        // Without the explicit allowance no credential goes over the unencrypted connection.
        let clear = try await failure(client(credentials: SMTPCredentials(username: "mailer", password: "s3cret")), "credentials in clear")
        XCTAssertEqual(clear, .insecureAuthenticationRefused)
        // Unauthenticated, the server refuses the mail for good.
        let anonymous = try await failure(client(), "no auth")
        XCTAssertEqual(anonymous?.isPermanent, true, "\(String(describing: anonymous))")
        XCTAssertEqual(try smtp.messages().count, 1)
    }

    func testHELOFallbackRefusalsAndTimeouts() async throws {
        try smtp.configure(["ehlo": false])
        _ = try await client().deliver(try message(text: "via HELO"), from: "app@example.com", to: "user@example.org")
        try smtp.configure(["ehlo": true, "reject": ["nobody@example.org"], "tempfail_rcpt": 1])
        let tempfail = try await failure(client(), "tempfail")
        guard case .transient(let reply)? = tempfail else { return XCTFail("\(String(describing: tempfail))") }
        XCTAssertEqual(reply.code, 451)
        let rejected = try await failure(client(), to: "nobody@example.org", "rejected recipient")
        XCTAssertEqual(rejected?.isPermanent, true, "\(String(describing: rejected))")
        try smtp.configure(["hang_data": true])
        let started = ContinuousClock.now
        let silent = try await failure(client(timeout: .milliseconds(500)), "silent server")
        guard case .timedOut? = silent else { return XCTFail("\(String(describing: silent))") }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(3))
        let closed = try await failure(client(port: FreePort.next()), "closed port")
        guard case .connectFailed? = closed else { return XCTFail("\(String(describing: closed))") }
        let implicitTLS = try await failure(SMTPClient(group: group, configuration: .init(host: "127.0.0.1", port: smtp.smtpPort, security: .tls)), "implicit TLS")
        // Implicit TLS to a plain server: the handshake fails, nothing is sent in clear.
        guard case .tls? = implicitTLS else { return XCTFail("\(String(describing: implicitTLS))") }
    }

    func testSTARTTLSAndImplicitTLSVerifyTheServerAndCarryCredentials() async throws {
        let authority = try TestCertificateAuthority()
        let leaf = try authority.issue(name: "localhost")
        let secure = try SMTPStandIn(tls: leaf)
        defer { secure.stop() }
        try secure.configure(["auth": ["mailer": "s3cret"]])
        let credentials = SMTPCredentials(username: "mailer", password: "s3cret")
        func tlsClient(_ security: SMTPSecurity, port: Int, caFile: String? = authority.caCertificate) -> SMTPClient {
            SMTPClient(group: group, configuration: .init(host: "localhost", port: port, security: security, credentials: credentials,
                                                          heloName: "parley.test", connectTimeout: .seconds(2), commandTimeout: .seconds(5),
                                                          deliveryTimeout: .seconds(10), tlsCAFile: caFile))
        }
        // STARTTLS: credentials go only over the upgraded connection, no insecure allowance needed.
        let upgraded = try await tlsClient(.startTLS, port: secure.smtpPort).deliver(try message(text: "via starttls"), from: "app@example.com", to: "user@example.org")
        XCTAssertEqual(upgraded.code, 250)
        let implicit = try await tlsClient(.tls, port: try XCTUnwrap(secure.smtpsPort)).deliver(try message(text: "via smtps"), from: "app@example.com", to: "user@example.org")
        XCTAssertEqual(implicit.code, 250)
        XCTAssertEqual(try secure.messagesOverTLS(), [true, true])
        XCTAssertTrue(try secure.messages().last?.data.contains("via smtps") == true)
        // The system store does not trust the test CA: refused before any credential is sent.
        let untrusted = try await failure(tlsClient(.startTLS, port: secure.smtpPort, caFile: nil), "untrusted certificate")
        guard case .tls(.verificationFailed)? = untrusted else { return XCTFail("\(String(describing: untrusted))") }
        let untrustedImplicit = try await failure(tlsClient(.tls, port: try XCTUnwrap(secure.smtpsPort), caFile: nil), "untrusted certificate")
        guard case .tls(.verificationFailed)? = untrustedImplicit else { return XCTFail("\(String(describing: untrustedImplicit))") }
        // A server that does not offer STARTTLS (the plain stand-in) is never used in clear.
        let plain = try await failure(SMTPClient(group: group, configuration: .init(host: "localhost", port: smtp.smtpPort, security: .startTLS,
                                                                                    credentials: credentials, tlsCAFile: authority.caCertificate)),
                                      "no STARTTLS offered")
        XCTAssertEqual(plain, .startTLSNotOffered)
        XCTAssertEqual(try secure.messages().count, 2)
        XCTAssertEqual(try smtp.messages().count, 0)
    }
}
