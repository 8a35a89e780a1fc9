import ParleyNet

/// The client side of the opening handshake (RFC 6455 section 4.1): the upgrade request with a
/// fresh random key, and the check of the server's `101` answer.
///
/// Sans-I/O: the caller writes `requestBytes` and gives the parsed response head to `validate`.
public struct WebSocketClientHandshake: Sendable {
    /// The `Sec-WebSocket-Key` sent: base64 of 16 random bytes.
    public let key: String
    /// The request's bytes on the wire.
    public let requestBytes: [UInt8]

    /// A request for `target` (path and query) on `authority` (`host:port`), with extra header
    /// fields (e.g. `User-Agent`); fields the handshake sets itself are not allowed among them.
    public init(authority: String, target: String, extraHeaders: [(String, String)] = []) {
        var generator = SystemRandomNumberGenerator()
        var nonce = [UInt8](repeating: 0, count: 16)
        for index in nonce.indices { nonce[index] = generator.next() }
        self.init(authority: authority, target: target, key: Base64.encode(nonce), extraHeaders: extraHeaders)
    }

    /// A request with a given key (tests).
    public init(authority: String, target: String, key: String, extraHeaders: [(String, String)] = []) {
        self.key = key
        var head = "GET \(target) HTTP/1.1\r\nHost: \(authority)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (name, value) in extraHeaders { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        requestBytes = Array(head.utf8)
    }

    /// Checks the server's answer: status 101, `Upgrade: websocket`, `Connection: upgrade` and
    /// the `Sec-WebSocket-Accept` that matches `key`. `header` looks a field up by lower-case name.
    public func validate(status: Int, header: (String) -> String?) throws(WebSocketClientHandshakeError) {
        guard status == 101 else { throw .unexpectedStatus(status) }
        guard let upgrade = header("upgrade"), WebSocketHandshake.containsToken("websocket", in: upgrade) else {
            throw .missingUpgrade
        }
        guard let connection = header("connection"), WebSocketHandshake.containsToken("upgrade", in: connection) else {
            throw .missingUpgrade
        }
        let accept = header("sec-websocket-accept").map(WebSocketHandshake.trimmed)
        guard accept == WebSocketHandshake.acceptValue(forKey: key) else { throw .acceptMismatch(accept) }
        if let extensions = header("sec-websocket-extensions"), !WebSocketHandshake.tokens(extensions).isEmpty {
            throw .unexpectedExtension(extensions)
        }
    }
}

/// Why a server's answer to the upgrade request was refused.
public enum WebSocketClientHandshakeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not `101 Switching Protocols` (the server refused, e.g. 404 or 426).
    case unexpectedStatus(Int)
    /// `Upgrade: websocket` or `Connection: Upgrade` missing.
    case missingUpgrade
    /// `Sec-WebSocket-Accept` absent or not the one the key asks for.
    case acceptMismatch(String?)
    /// The server negotiated an extension this side never offered.
    case unexpectedExtension(String)

    public var description: String {
        switch self {
        case .unexpectedStatus(let status): "the server answered the upgrade with status \(status)"
        case .missingUpgrade: "the server's answer lacks Upgrade: websocket / Connection: Upgrade"
        case .acceptMismatch(let value): "Sec-WebSocket-Accept \(value ?? "(missing)") does not match the key"
        case .unexpectedExtension(let value): "the server negotiated an extension that was not offered: \(value)"
        }
    }
}
