/// Why an upgrade request was refused; each case carries the HTTP status to answer with.
public enum WebSocketHandshakeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a GET (405).
    case methodNotAllowed(String)
    /// No `Upgrade: websocket` (426, with `Upgrade: websocket` in the response).
    case missingUpgradeHeader
    /// `Connection` lacks the `upgrade` token (400).
    case missingConnectionUpgrade
    /// `Sec-WebSocket-Version` absent or not 13 (426, with `Sec-WebSocket-Version: 13`).
    case unsupportedVersion(String?)
    /// No `Sec-WebSocket-Key` (400).
    case missingKey
    /// A key that is not base64 of 16 bytes (400).
    case invalidKey(String)
    /// `Origin` absent or not on the allow-list (403).
    case originNotAllowed(String?)

    /// The HTTP status code to answer with.
    public var status: Int {
        switch self {
        case .methodNotAllowed: 405
        case .missingUpgradeHeader, .unsupportedVersion: 426
        case .missingConnectionUpgrade, .missingKey, .invalidKey: 400
        case .originNotAllowed: 403
        }
    }

    /// The reason phrase for `status`.
    public var reasonPhrase: String {
        switch status {
        case 405: "Method Not Allowed"
        case 426: "Upgrade Required"
        case 403: "Forbidden"
        default: "Bad Request"
        }
    }

    /// Extra response headers the status requires (RFC 6455 section 4.4, RFC 9110).
    public var responseHeaders: [(String, String)] {
        switch self {
        case .methodNotAllowed: [("Allow", "GET")]
        case .missingUpgradeHeader: [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13")]
        case .unsupportedVersion: [("Sec-WebSocket-Version", "13")]
        default: []
        }
    }

    /// A complete HTTP/1.1 error response (plain-text body, `Connection: close`), for callers
    /// without an HTTP layer of their own.
    public var responseBytes: [UInt8] {
        let body = description + "\n"
        var head = "HTTP/1.1 \(status) \(reasonPhrase)\r\n"
        for (name, value) in responseHeaders { head += "\(name): \(value)\r\n" }
        head += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        return Array((head + body).utf8)
    }

    public var description: String {
        switch self {
        case .methodNotAllowed(let method): "WebSocket upgrade needs GET, not \(method)"
        case .missingUpgradeHeader: "missing Upgrade: websocket"
        case .missingConnectionUpgrade: "Connection header lacks the upgrade token"
        case .unsupportedVersion(let version): "unsupported Sec-WebSocket-Version \(version ?? "(none)"); 13 is supported"
        case .missingKey: "missing Sec-WebSocket-Key"
        case .invalidKey: "Sec-WebSocket-Key is not base64 of 16 bytes"
        case .originNotAllowed(let origin): "origin \(origin ?? "(none)") not allowed"
        }
    }
}
