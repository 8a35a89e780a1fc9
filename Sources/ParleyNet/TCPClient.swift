#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// Outbound TCP connections: a non-blocking connect on an event loop that yields a `Connection`
/// owned by that loop, and name resolution (blocking, for a worker thread).
public enum TCPClient {
    /// Per-connection settings.
    public struct Options: Sendable {
        /// Queued output past this closes the connection.
        public var maxOutboundBytes: Int
        /// Bytes read from the socket per `recv`.
        public var readBufferBytes: Int

        public init(maxOutboundBytes: Int = 4 << 20, readBufferBytes: Int = 16 * 1024) {
            self.maxOutboundBytes = maxOutboundBytes
            self.readBufferBytes = readBufferBytes
        }
    }

    /// Client connection ids count down from the top of the range, so they never meet the
    /// server's (which count up from 1).
    private static let nextID = Atomic<UInt64>(UInt64.max)

    /// Connects to `address` (loop thread only). `completion` runs once, on the loop, with the
    /// connected `Connection` (no handler set yet: set one before returning) or the error;
    /// a connect that has not finished after `timeout` fails with `ETIMEDOUT`.
    public static func connect(to address: SocketAddress, on loop: EventLoop, timeout: Duration, options: Options = Options(),
                               completion: @escaping (Result<Connection, NetError>) -> Void) {
        loop.preconditionInEventLoop()
        let fd = Glibc.socket(address.family, PARLEY_SOCK_STREAM | PARLEY_SOCK_NONBLOCK_CLOEXEC, 0)
        guard fd >= 0 else {
            let error = NetError.lastError("socket")
            loop.executeLocal { completion(.failure(error)) }
            return
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if result != 0 && errno != EINPROGRESS {
            let error = NetError.lastError("connect \(address)")
            Glibc.close(fd)
            loop.executeLocal { completion(.failure(error)) }
            return
        }
        let pending = PendingConnect(fd: fd, loop: loop, remote: address.description, options: options, completion: completion)
        do {
            try loop.register(fd: fd, interest: .writable, handler: pending)
        } catch {
            Glibc.close(fd)
            loop.executeLocal { completion(.failure(error)) }
            return
        }
        pending.timer = loop.schedule(after: timeout) { [weak pending] in
            pending?.finish(.failure(.system(call: "connect \(address)", errno: ETIMEDOUT)))
        }
    }

    /// Resolves `host` (a name, `localhost` or a numeric address) to TCP addresses with
    /// `getaddrinfo`. Blocks: call it on a worker thread, never on an event loop.
    public static func resolve(host: String, port: Int) throws(NetError) -> [SocketAddress] {
        if let numeric = try? SocketAddress(host: host, port: port) { return [numeric] }
        guard (0...65535).contains(port) else { throw NetError.invalidAddress("port \(port)") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else { throw NetError.invalidAddress("\(host): cannot resolve (getaddrinfo \(status))") }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let raw = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET:
                    addresses.append(SocketAddress(v4: raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }))
                case AF_INET6:
                    addresses.append(SocketAddress(v6: raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }))
                default:
                    break
                }
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw NetError.invalidAddress("\(host): no address") }
        return addresses
    }

    fileprivate static func makeID() -> UInt64 {
        nextID.wrappingSubtract(1, ordering: .relaxed).oldValue
    }
}

extension SocketAddress {
    init(v4: sockaddr_in) { storage = .v4(v4) }
    init(v6: sockaddr_in6) { storage = .v6(v6) }
}

/// A socket whose connect is in progress, watched for writability. Owned by `loop`'s thread.
private final class PendingConnect: IOHandler {
    let fd: Int32
    let loop: EventLoop
    let remote: String
    let options: TCPClient.Options
    var completion: ((Result<Connection, NetError>) -> Void)?
    var timer: TimerID?

    init(fd: Int32, loop: EventLoop, remote: String, options: TCPClient.Options, completion: @escaping (Result<Connection, NetError>) -> Void) {
        self.fd = fd
        self.loop = loop
        self.remote = remote
        self.options = options
        self.completion = completion
    }

    func handleReadable() { check() }
    func handleWritable() { check() }

    /// The connect finished (writable) or failed (error/hang-up reported as readable).
    private func check() {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) != 0 { code = errno }
        if code == EINPROGRESS || code == EALREADY { return }
        if code != 0 {
            finish(.failure(.system(call: "connect \(remote)", errno: code)))
            return
        }
        let connection = Connection(fd: fd, loop: loop, id: TCPClient.makeID(), remoteAddress: remote,
                                    readBuffer: ReadBuffer(capacity: options.readBufferBytes), maxOutboundBytes: options.maxOutboundBytes)
        finish(.success(connection))
    }

    func finish(_ result: Result<Connection, NetError>) {
        guard let completion else { return }
        self.completion = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        loop.deregister(fd: fd)
        switch result {
        case .success(let connection):
            do {
                try connection.activate()
                completion(.success(connection))
            } catch {
                Glibc.close(fd)
                completion(.failure(error))
            }
        case .failure(let error):
            Glibc.close(fd)
            completion(.failure(error))
        }
    }
}
