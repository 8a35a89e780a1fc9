#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address built from a numeric host (or `localhost`) and a port.
public struct SocketAddress: Sendable, CustomStringConvertible {
    enum Storage: Sendable {
        case v4(sockaddr_in)
        case v6(sockaddr_in6)
    }

    let storage: Storage

    /// Parses `host` (`0.0.0.0`, `127.0.0.1`, `::`, `::1`, `localhost`) and `port`.
    public init(host: String, port: Int) throws(NetError) {
        guard (0...65535).contains(port) else { throw NetError.invalidAddress("port \(port)") }
        let name = host == "localhost" ? "127.0.0.1" : host
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, name, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
            storage = .v4(v4)
            return
        }
        var v6 = sockaddr_in6()
        let bare = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
        if inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
            storage = .v6(v6)
            return
        }
        throw NetError.invalidAddress(host)
    }

    var family: Int32 {
        switch storage {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch storage {
        case .v4(var addr):
            return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        case .v6(var addr):
            return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        }
    }

    public var description: String {
        switch storage {
        case .v4(let addr): "\(SocketAddress.text(addr)):\(UInt16(bigEndian: addr.sin_port))"
        case .v6(let addr): "[\(SocketAddress.text(addr))]:\(UInt16(bigEndian: addr.sin6_port))"
        }
    }

    /// The `host:port` text of a peer address returned by accept or getpeername.
    static func describe(_ storage: UnsafePointer<sockaddr_storage>) -> String {
        switch Int32(storage.pointee.ss_family) {
        case AF_INET:
            return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { "\(text($0.pointee)):\(UInt16(bigEndian: $0.pointee.sin_port))" }
        case AF_INET6:
            return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { "[\(text($0.pointee))]:\(UInt16(bigEndian: $0.pointee.sin6_port))" }
        case AF_UNIX:
            return "unix"
        default:
            return "unknown"
        }
    }

    private static func text(_ addr: sockaddr_in) -> String {
        var copy = addr.sin_addr
        var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &copy, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func text(_ addr: sockaddr_in6) -> String {
        var copy = addr.sin6_addr
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        inet_ntop(AF_INET6, &copy, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
