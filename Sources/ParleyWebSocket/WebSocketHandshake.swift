import COpenSSL
import ParleyNet

/// Validates an HTTP/1.1 upgrade request and builds the `101 Switching Protocols` answer
/// (RFC 6455 section 4.2). Independent of any HTTP parser: give it the method and the headers.
///
/// A refused request gets a `WebSocketHandshakeError` carrying the status to answer with
/// (400, 403, 405 or 426) and its required headers, never a hang.
public struct WebSocketHandshake: Sendable {
    /// What the server accepts.
    public struct Configuration: Sendable {
        /// Allowed `Origin` values, compared case-insensitively (e.g. `https://app.example.com`);
        /// nil allows any origin.
        public var allowedOrigins: [String]?
        /// With an allow-list: whether a request without `Origin` (not a browser) is accepted.
        public var allowsMissingOrigin: Bool
        /// Subprotocols the server speaks, most preferred first; the first one the client also
        /// offers is selected.
        public var subprotocols: [String]

        public init(allowedOrigins: [String]? = nil, allowsMissingOrigin: Bool = true, subprotocols: [String] = []) {
            self.allowedOrigins = allowedOrigins
            self.allowsMissingOrigin = allowsMissingOrigin
            self.subprotocols = subprotocols
        }
    }

    /// An accepted upgrade: what goes into the 101 response.
    public struct Accepted: Sendable, Equatable {
        /// The `Sec-WebSocket-Accept` value.
        public let acceptValue: String
        /// The selected subprotocol, if any.
        public let subprotocol: String?

        /// Headers of the 101 response: `Upgrade`, `Connection`, `Sec-WebSocket-Accept` and, when
        /// one was selected, `Sec-WebSocket-Protocol`.
        public var headers: [(String, String)] {
            var headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptValue)]
            if let subprotocol { headers.append(("Sec-WebSocket-Protocol", subprotocol)) }
            return headers
        }

        /// The complete 101 response, with `extraHeaders` (e.g. `Server`) after the required ones.
        public func responseBytes(extraHeaders: [(String, String)] = []) -> [UInt8] {
            var head = "HTTP/1.1 101 Switching Protocols\r\n"
            for (name, value) in headers + extraHeaders { head += "\(name): \(value)\r\n" }
            head += "\r\n"
            return Array(head.utf8)
        }
    }

    public var configuration: Configuration

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Validates a request.
    ///
    /// - Parameters:
    ///   - method: the request method, e.g. `GET`.
    ///   - header: looks a header up by name, case-insensitively (names are passed in lower
    ///     case), returning every value of that field joined with `", "`, or nil if absent.
    ///
    /// The HTTP layer must also have checked that the request is HTTP/1.1 or later.
    public func validate(method: String, header: (String) -> String?) throws(WebSocketHandshakeError) -> Accepted {
        guard method == "GET" else { throw .methodNotAllowed(method) }
        guard let upgrade = header("upgrade"), Self.containsToken("websocket", in: upgrade) else {
            throw .missingUpgradeHeader
        }
        guard let connection = header("connection"), Self.containsToken("upgrade", in: connection) else {
            throw .missingConnectionUpgrade
        }
        let version = header("sec-websocket-version").map(Self.trimmed)
        guard version == "13" else { throw .unsupportedVersion(version) }
        guard let rawKey = header("sec-websocket-key") else { throw .missingKey }
        let key = Self.trimmed(rawKey)
        guard Self.isValidKey(key) else { throw .invalidKey(key) }
        if let allowed = configuration.allowedOrigins {
            if let origin = header("origin").map(Self.trimmed) {
                let lowered = origin.lowercased()
                guard allowed.contains(where: { $0.lowercased() == lowered }) else { throw .originNotAllowed(origin) }
            } else if !configuration.allowsMissingOrigin {
                throw .originNotAllowed(nil)
            }
        }
        var subprotocol: String?
        if !configuration.subprotocols.isEmpty, let offered = header("sec-websocket-protocol") {
            let tokens = Self.tokens(offered)
            subprotocol = configuration.subprotocols.first { tokens.contains($0) }
        }
        return Accepted(acceptValue: Self.acceptValue(forKey: key), subprotocol: subprotocol)
    }

    /// Validates a request given as a header list (names in any case; repeated fields are joined).
    public func validate(method: String, headers: [(String, String)]) throws(WebSocketHandshakeError) -> Accepted {
        try validate(method: method) { name in
            var joined: String?
            for (key, value) in headers where key.lowercased() == name {
                joined = joined.map { $0 + ", " + value } ?? value
            }
            return joined
        }
    }

    /// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + the RFC 6455 GUID)).
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = input.withUnsafeBufferPointer { source in
            digest.withUnsafeMutableBufferPointer { SHA1(source.baseAddress, source.count, $0.baseAddress) }
        }
        return Base64.encode(digest)
    }

    /// A key must be base64 of 16 bytes: 22 alphabet characters and `==`.
    static func isValidKey(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        guard bytes.count == 24, bytes[22] == UInt8(ascii: "="), bytes[23] == UInt8(ascii: "=") else { return false }
        return bytes[..<22].allSatisfy(Base64.isAlphabet)
    }

    /// Whether a comma-separated header value contains `token` (case-insensitive).
    static func containsToken(_ token: String, in value: String) -> Bool {
        tokens(value).contains { $0.lowercased() == token }
    }

    static func tokens(_ value: String) -> [String] {
        value.split(separator: ",").map { trimmed(String($0)) }.filter { !$0.isEmpty }
    }

    static func trimmed(_ value: String) -> String {
        let scalars = value.unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return String(scalars[first...last])
    }
}
