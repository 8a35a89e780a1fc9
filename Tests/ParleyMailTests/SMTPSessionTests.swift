@testable import ParleyMail
import ParleyNet
import XCTest

/// The SMTP client state machine and reply parser, without sockets.
final class SMTPSessionTests: XCTestCase {
    func machine(security: SMTPSecurity = .none, credentials: SMTPCredentials? = nil, insecure: Bool = false) -> SMTPSessionStateMachine {
        SMTPSessionStateMachine(settings: .init(heloName: "parley.test", security: security, credentials: credentials, allowInsecureAuthentication: insecure),
                                sender: "app@example.com", recipient: "user@example.org", message: Array("Subject: x\r\n\r\nhi\r\n".utf8), isEncrypted: false)
    }

    func reply(_ code: Int, _ lines: String...) -> SMTPReply { SMTPReply(code: code, lines: lines.isEmpty ? ["ok"] : lines) }

    func sent(_ action: SMTPSessionStateMachine.Action) -> String? {
        if case .send(let bytes) = action { return String(decoding: bytes, as: UTF8.self) }
        return nil
    }

    func testPlainDelivery() {
        var m = machine()
        XCTAssertEqual(sent(m.receive(reply(220, "mx ESMTP"))), "EHLO parley.test\r\n")
        XCTAssertEqual(sent(m.receive(reply(250, "mx", "PIPELINING", "8BITMIME"))), "MAIL FROM:<app@example.com>\r\n")
        XCTAssertEqual(sent(m.receive(reply(250))), "RCPT TO:<user@example.org>\r\n")
        XCTAssertEqual(sent(m.receive(reply(250))), "DATA\r\n")
        XCTAssertEqual(sent(m.receive(reply(354))), "Subject: x\r\n\r\nhi\r\n.\r\n")
        XCTAssertEqual(m.receive(reply(250, "queued")), .delivered(reply(250, "queued")))
        XCTAssertEqual(String(decoding: m.quit(), as: UTF8.self), "QUIT\r\n")
    }

    func testHELOFallbackOnlyWhenNothingNeedsExtensions() {
        var m = machine()
        _ = m.receive(reply(220))
        XCTAssertEqual(sent(m.receive(reply(502, "no EHLO"))), "HELO parley.test\r\n")
        XCTAssertEqual(sent(m.receive(reply(250))), "MAIL FROM:<app@example.com>\r\n")
        var secure = machine(security: .startTLS)
        _ = secure.receive(reply(220))
        XCTAssertEqual(secure.receive(reply(502)), .fail(.permanent(reply(502))))
    }

    func testAuthentication() {
        let credentials = SMTPCredentials(username: "user", password: "secret")
        var plain = machine(credentials: credentials, insecure: true)
        _ = plain.receive(reply(220))
        XCTAssertEqual(sent(plain.receive(reply(250, "mx", "AUTH LOGIN PLAIN"))), "AUTH PLAIN " + Base64.encode(Array("\0user\0secret".utf8)) + "\r\n")
        XCTAssertEqual(sent(plain.receive(reply(235))), "MAIL FROM:<app@example.com>\r\n")

        var login = machine(credentials: credentials, insecure: true)
        _ = login.receive(reply(220))
        XCTAssertEqual(sent(login.receive(reply(250, "mx", "AUTH=LOGIN"))), "AUTH LOGIN\r\n")
        XCTAssertEqual(sent(login.receive(reply(334, "VXNlcm5hbWU6"))), Base64.encode(Array("user".utf8)) + "\r\n")
        XCTAssertEqual(sent(login.receive(reply(334, "UGFzc3dvcmQ6"))), Base64.encode(Array("secret".utf8)) + "\r\n")
        XCTAssertEqual(login.receive(reply(535, "bad")), .fail(.authenticationFailed(reply(535, "bad"))))

        // Credentials never go out in clear text unless allowed.
        var refused = machine(credentials: credentials)
        _ = refused.receive(reply(220))
        XCTAssertEqual(refused.receive(reply(250, "mx", "AUTH PLAIN")), .fail(.insecureAuthenticationRefused))
        var unoffered = machine(credentials: credentials, insecure: true)
        _ = unoffered.receive(reply(220))
        XCTAssertEqual(unoffered.receive(reply(250, "mx", "AUTH CRAM-MD5")), .fail(.authenticationNotOffered))
    }

    func testStartTLSIsRequiredWhenConfigured() {
        var m = machine(security: .startTLS, credentials: SMTPCredentials(username: "u", password: "p"))
        _ = m.receive(reply(220))
        XCTAssertEqual(sent(m.receive(reply(250, "mx", "STARTTLS", "AUTH PLAIN"))), "STARTTLS\r\n")
        XCTAssertEqual(m.receive(reply(220, "go ahead")), .startTLS)
        // After the handshake: EHLO again, and credentials may go since the channel is encrypted.
        XCTAssertEqual(sent(m.tlsEstablished()), "EHLO parley.test\r\n")
        XCTAssertEqual(sent(m.receive(reply(250, "mx", "AUTH PLAIN"))), "AUTH PLAIN " + Base64.encode(Array("\0u\0p".utf8)) + "\r\n")

        var downgrade = machine(security: .startTLS)
        _ = downgrade.receive(reply(220))
        XCTAssertEqual(downgrade.receive(reply(250, "mx", "8BITMIME")), .fail(.startTLSNotOffered))
    }

    func testRefusalsAreClassified() {
        var m = machine()
        _ = m.receive(reply(220))
        _ = m.receive(reply(250))
        _ = m.receive(reply(250))
        XCTAssertEqual(m.receive(reply(550, "no such user")), .fail(.permanent(reply(550, "no such user"))))
        XCTAssertTrue(SMTPError.permanent(reply(550)).isPermanent)
        var busy = machine()
        XCTAssertEqual(busy.receive(reply(421, "busy")), .fail(.transient(reply(421, "busy"))))
        XCTAssertFalse(SMTPError.transient(reply(421)).isPermanent)
    }

    func testDotStuffing() {
        let payload = SMTPSessionStateMachine.dataPayload(Array(".first\nmiddle\r\n.\r\n..two\rlast".utf8))
        XCTAssertEqual(String(decoding: payload, as: UTF8.self), "..first\r\nmiddle\r\n..\r\n...two\r\nlast\r\n.\r\n")
    }

    func testReplyParser() throws {
        var parser = SMTPReplyParser()
        parser.append(Array("250-mx.example\r\n250-AUTH PLAIN\r\n250 SIZE".utf8))
        XCTAssertNil(try parser.next())
        parser.append(Array(" 100\r\n220 next\n".utf8))
        XCTAssertEqual(try parser.next(), SMTPReply(code: 250, lines: ["mx.example", "AUTH PLAIN", "SIZE 100"]))
        XCTAssertEqual(try parser.next(), SMTPReply(code: 220, lines: ["next"]))
        XCTAssertNil(try parser.next())
        for bad in ["hello\r\n", "250-a\r\n354 b\r\n", "999 x\r\n", "25\r\n", "250+x\r\n"] {
            var parser = SMTPReplyParser()
            parser.append(Array(bad.utf8))
            XCTAssertThrowsError(try parser.next(), bad)
        }
        var flood = SMTPReplyParser()
        flood.append([UInt8](repeating: UInt8(ascii: "2"), count: SMTPReplyParser.maxLineBytes + 1))
        XCTAssertThrowsError(try flood.next(), "a line without end past the bound")
        var many = SMTPReplyParser()
        many.append(Array(String(repeating: "250-x\r\n", count: SMTPReplyParser.maxLines + 1).utf8))
        XCTAssertThrowsError(try many.next(), "too many lines")
    }
}
