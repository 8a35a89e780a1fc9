/// An `http://` or `https://` URL split into what a request needs: scheme, host, port and
/// request-target. An `https://` URL is only ever sent over TLS with a verified certificate.
public struct HTTPClientURL: Sendable, Hashable, CustomStringConvertible {
    /// The host name or numeric address (IPv6 without brackets).
    public var host: String
    public var port: Int
    /// Path and query (`/` when the URL has none).
    public var target: String
    /// `https`: TLS, the server's chain and name verified.
    public var isSecure: Bool

    public init(host: String, port: Int? = nil, target: String = "/", secure: Bool = false) {
        self.host = host
        self.port = port ?? (secure ? 443 : 80)
        self.target = target
        isSecure = secure
    }

    /// Parses `http[s]://host[:port][/path][?query]`; nil for anything else.
    public init?(_ text: String) {
        let lowered = text.prefix(8).lowercased()
        let secure = lowered.hasPrefix("https://")
        guard secure || lowered.hasPrefix("http://") else { return nil }
        let rest = text.dropFirst(secure ? 8 : 7)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...])
        if let fragment = target.firstIndex(of: "#") { target = String(target[..<fragment]) }
        if target.isEmpty || target.first == "?" { target = "/" + target }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var host: Substring
        var portText: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        var port = secure ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, let parsed = Int(portText), (1...65535).contains(parsed) else { return nil }
            port = parsed
        }
        guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        self.host = String(host)
        self.port = port
        self.target = target
        isSecure = secure
    }

    /// The `Host` header value.
    public var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// Scheme, host and port: what a pooled connection is for.
    public var origin: String { "\(isSecure ? "https" : "http")://\(host):\(port)" }

    public var description: String { "\(isSecure ? "https" : "http")://\(authority)\(target)" }
}
