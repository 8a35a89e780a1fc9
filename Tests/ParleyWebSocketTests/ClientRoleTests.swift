import ParleyWebSocket
import XCTest

/// The client side of RFC 6455: masked frames out, unmasked frames in, the handshake check.
final class ClientRoleTests: XCTestCase {
    func testClientFramesAreMaskedWithFreshKeysAndAServerReadsThem() {
        let client = WebSocketConnectionStateMachine(role: .client)
        let first = client.textFrame("hello")
        let second = client.textFrame("hello")
        XCTAssertEqual(first[1] & 0x80, 0x80, "mask bit set")
        XCTAssertNotEqual(Array(first[2..<6]), Array(second[2..<6]), "a new key per frame")
        XCTAssertNotEqual(Array(first[6...]), Array("hello".utf8), "the payload is masked")
        var server = WebSocketConnectionStateMachine()
        XCTAssertEqual(server.receive(first), [.deliverText("hello")])
        XCTAssertEqual(server.receive(client.binaryFrame([1, 2, 3])), [.deliverBinary([1, 2, 3])])
    }

    func testAClientRefusesMaskedFramesAndAnswersPingsAndClosesMasked() {
        var client = WebSocketConnectionStateMachine(role: .client)
        let unmasked = WebSocketFrameEncoder.text("from server")
        XCTAssertEqual(client.receive(unmasked), [.deliverText("from server")])
        let ping = WebSocketFrameEncoder.encode(opcode: .ping, payload: [7])
        guard case .send(let pong)? = client.receive(ping).first else { return XCTFail("no pong") }
        XCTAssertEqual(pong[0] & 0x0F, WebSocketOpcode.pong.rawValue)
        XCTAssertEqual(pong[1], 0x80 | 1, "masked, one byte")
        var server = WebSocketConnectionStateMachine()
        XCTAssertEqual(server.receive(pong), [.receivedPong([7])])

        let close = WebSocketFrameEncoder.close(code: WebSocketCloseCode(4001), reason: "replaced")
        let actions = client.receive(close)
        XCTAssertEqual(client.receivedClose, WebSocketCloseStatus(code: WebSocketCloseCode(4001), reason: "replaced"))
        guard case .send(let echo)? = actions.first else { return XCTFail("no close echo") }
        XCTAssertEqual(echo[1] & 0x80, 0x80)
        XCTAssertEqual(actions.last, .closeConnection)

        var strict = WebSocketConnectionStateMachine(role: .client)
        let masked = WebSocketFrameEncoder.text("x", maskingKey: 0x01020304)
        guard case .send(let protocolClose)? = strict.receive(masked).first else { return XCTFail("a masked server frame must fail") }
        XCTAssertEqual(strict.failure, .maskedFrame)
        XCTAssertEqual(protocolClose[1] & 0x80, 0x80, "even the error close is masked")
    }

    func testTheHandshakeChecksTheAcceptValue() throws {
        let handshake = WebSocketClientHandshake(authority: "127.0.0.1:8080", target: "/v1/socket", key: "dGhlIHNhbXBsZSBub25jZQ==")
        let request = String(decoding: handshake.requestBytes, as: UTF8.self)
        XCTAssertTrue(request.hasPrefix("GET /v1/socket HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"))
        XCTAssertTrue(request.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"))
        XCTAssertTrue(request.hasSuffix("\r\n\r\n"))
        let good: [String: String] = ["upgrade": "websocket", "connection": "Upgrade", "sec-websocket-accept": "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]
        XCTAssertNoThrow(try handshake.validate(status: 101) { good[$0] })
        XCTAssertThrowsError(try handshake.validate(status: 426) { good[$0] }) {
            XCTAssertEqual($0 as? WebSocketClientHandshakeError, .unexpectedStatus(426))
        }
        var wrong = good
        wrong["sec-websocket-accept"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="
        XCTAssertThrowsError(try handshake.validate(status: 101) { wrong[$0] })
        var noUpgrade = good
        noUpgrade["upgrade"] = nil
        XCTAssertThrowsError(try handshake.validate(status: 101) { noUpgrade[$0] })
        var extensions = good
        extensions["sec-websocket-extensions"] = "permessage-deflate"
        XCTAssertThrowsError(try handshake.validate(status: 101) { extensions[$0] })
        let random = WebSocketClientHandshake(authority: "h", target: "/")
        XCTAssertEqual(random.key.count, 24)
        XCTAssertNotEqual(random.key, WebSocketClientHandshake(authority: "h", target: "/").key)
    }
}
