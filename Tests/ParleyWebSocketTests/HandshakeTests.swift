import XCTest
import ParleyNet
@testable import ParleyWebSocket

final class HandshakeTests: XCTestCase {
    private let key = "dGhlIHNhbXBsZSBub25jZQ=="

    private func request(_ overrides: [(String, String?)] = []) -> [(String, String)] {
        var headers: [(String, String?)] = [
            ("Host", "example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"),
        ]
        for (name, value) in overrides {
            headers.removeAll { $0.0.lowercased() == name.lowercased() }
            headers.append((name, value))
        }
        return headers.compactMap { name, value in value.map { (name, $0) } }
    }

    private func failure(_ headers: [(String, String)], handshake: WebSocketHandshake = WebSocketHandshake(), method: String = "GET") -> WebSocketHandshakeError? {
        do {
            _ = try handshake.validate(method: method, headers: headers)
            return nil
        } catch {
            return error
        }
    }

    func testAcceptValueMatchesRFCExample() {
        XCTAssertEqual(WebSocketHandshake.acceptValue(forKey: key), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func testBase64Vectors() {
        // RFC 4648 section 10.
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (input, output) in vectors { XCTAssertEqual(Base64.encode(Array(input.utf8)), output) }
        XCTAssertEqual(Base64.encode([0xFF, 0xEF, 0xBE]), "/+++")
    }

    func testValidRequestBuilds101() throws {
        let accepted = try WebSocketHandshake().validate(method: "GET", headers: request())
        XCTAssertEqual(accepted.acceptValue, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        XCTAssertNil(accepted.subprotocol)
        XCTAssertEqual(accepted.headers.map { $0.0 }, ["Upgrade", "Connection", "Sec-WebSocket-Accept"])
        XCTAssertEqual(
            String(decoding: accepted.responseBytes(extraHeaders: [("Server", "t")]), as: UTF8.self),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nServer: t\r\n\r\n")
    }

    func testHeaderNamesAndTokensAreCaseInsensitiveLists() throws {
        let headers = [
            ("UPGRADE", "WebSocket"), ("connection", "keep-alive, Upgrade"),
            ("sec-websocket-key", " \(key) "), ("SEC-WEBSOCKET-VERSION", "13"),
        ]
        XCTAssertNoThrow(try WebSocketHandshake().validate(method: "GET", headers: headers))
        // Repeated Connection fields are joined.
        XCTAssertNoThrow(try WebSocketHandshake().validate(method: "GET", headers: request([("Connection", "keep-alive")]) + [("Connection", "upgrade")]))
        // The closure form.
        let lookup = Dictionary(uniqueKeysWithValues: request().map { ($0.0.lowercased(), $0.1) })
        XCTAssertNoThrow(try WebSocketHandshake().validate(method: "GET") { lookup[$0] })
    }

    func testRefusals() {
        XCTAssertEqual(failure(request(), method: "POST"), .methodNotAllowed("POST"))
        XCTAssertEqual(failure(request([("Upgrade", nil)])), .missingUpgradeHeader)
        XCTAssertEqual(failure(request([("Upgrade", "h2c")])), .missingUpgradeHeader)
        XCTAssertEqual(failure(request([("Connection", "keep-alive")])), .missingConnectionUpgrade)
        XCTAssertEqual(failure(request([("Connection", nil)])), .missingConnectionUpgrade)
        XCTAssertEqual(failure(request([("Sec-WebSocket-Version", "8")])), .unsupportedVersion("8"))
        XCTAssertEqual(failure(request([("Sec-WebSocket-Version", nil)])), .unsupportedVersion(nil))
        XCTAssertEqual(failure(request([("Sec-WebSocket-Key", nil)])), .missingKey)
        XCTAssertEqual(failure(request([("Sec-WebSocket-Key", "short")])), .invalidKey("short"))
        XCTAssertEqual(failure(request([("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=!")])), .invalidKey("dGhlIHNhbXBsZSBub25jZQ=!"))
        XCTAssertEqual(failure(request([("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZ*==")])), .invalidKey("dGhlIHNhbXBsZSBub25jZ*=="))
    }

    func testRefusalStatusesAndResponses() {
        XCTAssertEqual(WebSocketHandshakeError.methodNotAllowed("PUT").status, 405)
        XCTAssertEqual(WebSocketHandshakeError.missingUpgradeHeader.status, 426)
        XCTAssertEqual(WebSocketHandshakeError.unsupportedVersion("8").status, 426)
        XCTAssertEqual(WebSocketHandshakeError.missingConnectionUpgrade.status, 400)
        XCTAssertEqual(WebSocketHandshakeError.missingKey.status, 400)
        XCTAssertEqual(WebSocketHandshakeError.invalidKey("x").status, 400)
        XCTAssertEqual(WebSocketHandshakeError.originNotAllowed(nil).status, 403)
        XCTAssertTrue(WebSocketHandshakeError.unsupportedVersion("8").responseHeaders.contains { $0 == ("Sec-WebSocket-Version", "13") })
        let response = String(decoding: WebSocketHandshakeError.unsupportedVersion("8").responseBytes, as: UTF8.self)
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"), response)
        XCTAssertTrue(response.contains("\r\nSec-WebSocket-Version: 13\r\n"))
        XCTAssertTrue(response.contains("\r\nConnection: close\r\n"))
        let body = response.components(separatedBy: "\r\n\r\n")[1]
        XCTAssertTrue(response.contains("Content-Length: \(body.utf8.count)\r\n"))
    }

    func testOriginAllowList() {
        let handshake = WebSocketHandshake(configuration: .init(allowedOrigins: ["https://app.example.com"]))
        XCTAssertNil(failure(request([("Origin", "https://app.example.com")]), handshake: handshake))
        XCTAssertNil(failure(request([("Origin", "HTTPS://App.Example.com")]), handshake: handshake))
        XCTAssertEqual(failure(request([("Origin", "https://evil.example")]), handshake: handshake), .originNotAllowed("https://evil.example"))
        XCTAssertNil(failure(request(), handshake: handshake), "a client without Origin is not a browser")
        let strict = WebSocketHandshake(configuration: .init(allowedOrigins: ["https://app.example.com"], allowsMissingOrigin: false))
        XCTAssertEqual(failure(request(), handshake: strict), .originNotAllowed(nil))
        XCTAssertNil(failure(request([("Origin", "https://anything")]), handshake: WebSocketHandshake()), "no list allows any origin")
    }

    func testSubprotocolSelectionPrefersTheServerOrder() throws {
        let handshake = WebSocketHandshake(configuration: .init(subprotocols: ["parley.v2", "parley.v1"]))
        let both = try handshake.validate(method: "GET", headers: request([("Sec-WebSocket-Protocol", "parley.v1, parley.v2")]))
        XCTAssertEqual(both.subprotocol, "parley.v2")
        XCTAssertTrue(both.headers.contains { $0 == ("Sec-WebSocket-Protocol", "parley.v2") })
        let one = try handshake.validate(method: "GET", headers: request([("Sec-WebSocket-Protocol", "chat"), ("sec-websocket-protocol", "parley.v1")]))
        XCTAssertEqual(one.subprotocol, "parley.v1")
        let none = try handshake.validate(method: "GET", headers: request([("Sec-WebSocket-Protocol", "chat")]))
        XCTAssertNil(none.subprotocol)
        XCTAssertFalse(none.headers.contains { $0.0 == "Sec-WebSocket-Protocol" })
    }
}
