/// An `http://` URL split into what a request needs: host, port and request-target.
///
/// Only plain HTTP: a push gateway or other internal service runs beside Parley on a private
/// network. `https://` is refused rather than silently sent in the clear.
public struct HTTPClientURL: Sendable, Hashable, CustomStringConvertible {
    /// The host name or numeric address (IPv6 without brackets).
    public var host: String
    public var port: Int
    /// Path and query (`/` when the URL has none).
    public var target: String

    public init(host: String, port: Int = 80, target: String = "/") {
        self.host = host
        self.port = port
        self.target = target
    }

    /// Parses `http://host[:port][/path][?query]`; nil for anything else.
    public init?(_ text: String) {
        guard text.lowercased().hasPrefix("http://") else { return nil }
        let rest = text.dropFirst(7)
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
        var port = 80
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, let parsed = Int(portText), (1...65535).contains(parsed) else { return nil }
            port = parsed
        }
        guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        self.host = String(host)
        self.port = port
        self.target = target
    }

    /// The `Host` header value.
    public var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == 80 ? name : "\(name):\(port)"
    }

    public var description: String { "http://\(authority)\(target)" }
}
