#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `::1/128`; a bare address is a
/// single host), for deciding whether a peer is a trusted proxy.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16), host bits cleared.
    private let prefix: [UInt8]
    private let bits: Int

    /// Nil unless `text` is an address, optionally with `/bits` in range for its family.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = Self.bytes(of: String(parts[0])) else { return nil }
        var bits = address.count * 8
        if parts.count == 2 {
            guard let given = Int(parts[1]), (0...bits).contains(given), parts[1].allSatisfy(\.isASCII) else { return nil }
            bits = given
        }
        self.bits = bits
        prefix = Self.masked(address, bits: bits)
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = prefix.count == 4 ? AF_INET : AF_INET6
        _ = prefix.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/\(bits)"
    }

    /// Whether `address` (`1.2.3.4`, `::1`, or a peer's `host:port` / `[v6]:port` as
    /// `Connection.remoteAddress` spells it) lies in this network. An IPv4-mapped IPv6 address
    /// (`::ffff:1.2.3.4`) counts as its IPv4 address.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: Self.host(of: address)) else { return false }
        return bytes.count == prefix.count && Self.masked(bytes, bits: bits) == prefix
    }

    /// The host part of `host:port` or `[host]:port`; anything else unchanged.
    public static func host(of address: String) -> String {
        if address.hasPrefix("["), let end = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<end])
        }
        if let colon = address.lastIndex(of: ":"), address.firstIndex(of: ":") == colon {
            return String(address[..<colon])
        }
        return address
    }

    /// The address bytes of a numeric IPv4 or IPv6 address (mapped IPv4 as 4 bytes).
    private static func bytes(of host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }

    private static func masked(_ bytes: [UInt8], bits: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let kept = min(8, max(0, bits - index * 8))
            return kept == 8 ? byte : byte & ~(UInt8(0xFF) >> kept)
        }
    }
}
