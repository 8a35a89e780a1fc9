import ParleyHTTP
import ParleyNet

/// Where clients reach the server: the root of every URL the server hands out (`Location`
/// headers now; file URLs and email links later).
///
/// With `--public-url` that URL is used whatever the request says. Without it the URL is built
/// from the request, as Parse Server does: the `Host` the client sent and `http`, and
/// `X-Forwarded-Proto` / `X-Forwarded-Host` only when the peer is one of `trustedProxies` (a
/// client cannot make the server print a scheme or host of its choosing through headers only a
/// proxy should set).
public struct ParseServerURL: Sendable, Equatable {
    /// `scheme://host[:port][/path]` without a trailing slash; nil: built from each request.
    public let publicURL: String?
    /// Peers whose `X-Forwarded-*` headers are believed.
    public let trustedProxies: [IPNetwork]

    /// `publicURL` must pass `normalized(publicURL:)` (the configuration layer checks it).
    public init(publicURL: String? = nil, trustedProxies: [IPNetwork] = []) {
        self.publicURL = publicURL.flatMap(Self.normalized(publicURL:))
        self.trustedProxies = trustedProxies
    }

    /// `text` without a trailing slash if it is an absolute `http` or `https` URL with a host and
    /// no user info, query or fragment; nil otherwise.
    public static func normalized(publicURL text: String) -> String? {
        var url = text
        while url.hasSuffix("/") { url.removeLast() }
        let scheme: String
        if url.hasPrefix("https://") {
            scheme = "https://"
        } else if url.hasPrefix("http://") {
            scheme = "http://"
        } else {
            return nil
        }
        let rest = url.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" }
        guard isAuthority(Substring(authority)), !rest.contains(where: { $0 == "?" || $0 == "#" || $0 == " " || $0 == "\\" }),
              rest.allSatisfy({ $0.isASCII && !$0.isNewline }) else { return nil }
        return url
    }

    /// The path of the public URL (`/api` for `https://example.com/api`), empty without one.
    public var publicPath: String {
        guard let publicURL else { return "" }
        let rest = publicURL.drop { $0 != ":" }.dropFirst(3)
        return String(rest.drop { $0 != "/" })
    }

    /// The server's root URL as the client of `headers`, connected from `peer`, reaches it.
    public func root(headers: HTTPHeaders, peer: String) -> String {
        if let publicURL { return publicURL }
        var scheme = "http"
        var host = headers["Host"]
        if trustedProxies.contains(where: { $0.contains(peer) }) {
            if let proto = Self.firstListValue(headers["X-Forwarded-Proto"])?.lowercased(), proto == "https" || proto == "http" {
                scheme = proto
            }
            if let forwarded = Self.firstListValue(headers["X-Forwarded-Host"]) { host = forwarded }
        }
        guard let host, Self.isAuthority(Substring(host)) else { return scheme + "://localhost" }
        return scheme + "://" + host
    }

    /// The client's host address (no port): `peer`'s, or, when `peer` is a trusted proxy, the
    /// nearest address in `X-Forwarded-For` (read from the right) that is not itself one.
    public func clientAddress(headers: HTTPHeaders, peer: String) -> String {
        var client = IPNetwork.host(of: peer)
        guard trustedProxies.contains(where: { $0.contains(peer) }), let chain = headers["X-Forwarded-For"] else { return client }
        for hop in chain.split(separator: ",").reversed() {
            let address = String(hop.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
            guard !address.isEmpty, address.utf8.count <= 64 else { break }
            client = IPNetwork.host(of: address)
            if !trustedProxies.contains(where: { $0.contains(address) }) { break }
        }
        return client
    }

    /// The first entry of a comma-separated header (the client-facing one in a proxy chain).
    private static func firstListValue(_ value: String?) -> String? {
        guard let value else { return nil }
        let first = value.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map {
            $0.drop(while: { $0 == " " || $0 == "\t" })
        }
        guard let first else { return nil }
        var trimmed = Substring(first)
        while trimmed.last == " " || trimmed.last == "\t" { trimmed.removeLast() }
        return trimmed.isEmpty ? nil : String(trimmed)
    }

    /// A host (name, IPv4 or bracketed IPv6) with an optional port: what may follow `scheme://`.
    private static func isAuthority(_ text: Substring) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 255 else { return false }
        return text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "_")
        }
    }
}
