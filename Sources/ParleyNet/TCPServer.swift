#if canImport(Glibc)
import Glibc
#endif
import CLinux
import ParleyLog
import Synchronization

/// A TCP server with one `SO_REUSEPORT` listener per loop; a connection stays on the loop
/// that accepted it.
public final class TCPServer: Sendable {
    /// Listening and per-connection settings.
    public struct Options: Sendable {
        public var host: String
        public var port: Int
        public var backlog: Int
        /// Connections past this are accepted and closed at once.
        public var maxConnections: Int
        /// Queued output past this closes the connection (a reader that does not keep up).
        public var maxOutboundBytes: Int
        /// Queued output none of which the peer takes for this long closes the connection (slow reader); zero: never.
        public var slowReaderTimeout: Duration
        /// When set, every accepted connection speaks TLS (the handler sees plaintext).
        public var tls: TLSServerContext?

        public init(
            host: String = "0.0.0.0", port: Int, backlog: Int = 1024, maxConnections: Int = 100_000, maxOutboundBytes: Int = 4 << 20,
            slowReaderTimeout: Duration = .seconds(30), tls: TLSServerContext? = nil
        ) {
            self.host = host
            self.port = port
            self.backlog = backlog
            self.maxConnections = maxConnections
            self.maxOutboundBytes = maxOutboundBytes
            self.slowReaderTimeout = slowReaderTimeout
            self.tls = tls
        }
    }

    private let group: EventLoopGroup
    private let options: Options
    private let makeHandler: @Sendable (Connection) -> any ConnectionHandler
    private let listeners: [Listener]
    private let boundPort = Atomic<Int>(0)
    private let open = Atomic<Int>(0)
    private let accepted = Atomic<Int>(0)
    private static let nextID = Atomic<UInt64>(1)

    public init(group: EventLoopGroup, options: Options, makeHandler: @escaping @Sendable (Connection) -> any ConnectionHandler) {
        self.group = group
        self.options = options
        self.makeHandler = makeHandler
        self.listeners = group.loops.map { Listener(loop: $0) }
    }

    /// The bound port (useful with port 0).
    public var port: Int { boundPort.load(ordering: .acquiring) }
    /// Connections open now.
    public func openConnections() -> Int { open.load(ordering: .relaxed) }
    /// Connections accepted since start.
    public var acceptedConnections: Int { accepted.load(ordering: .relaxed) }

    /// Binds and listens on every loop.
    public func start() throws(NetError) {
        var port = options.port
        var fds: [Int32] = []
        do {
            for _ in listeners {
                let fd = try TCPServer.listenSocket(host: options.host, port: port, backlog: options.backlog)
                fds.append(fd)
                if port == 0 { port = TCPServer.localPort(fd) }
            }
        } catch {
            for fd in fds { Glibc.close(fd) }
            throw error
        }
        boundPort.store(port, ordering: .releasing)
        let registered = Atomic<Int>(0)
        for (listener, fd) in zip(listeners, fds) {
            listener.loop.execute { [self] in
                listener.start(fd: fd, server: self)
                registered.add(1, ordering: .releasing)
            }
        }
        while registered.load(ordering: .acquiring) < listeners.count { sched_yield() }
    }

    /// Stops accepting and asks every connection to finish its work and close.
    public func quiesce() {
        for listener in listeners {
            listener.loop.execute { listener.quiesce() }
        }
    }

    /// Closes every connection now.
    public func closeAll() {
        for listener in listeners {
            listener.loop.execute { listener.closeAll() }
        }
    }

    fileprivate func admit(fd: Int32, remote: String, listener: Listener) {
        let current = open.load(ordering: .relaxed)
        guard current < options.maxConnections else {
            Glibc.close(fd)
            return
        }
        open.add(1, ordering: .relaxed)
        accepted.add(1, ordering: .relaxed)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let connection = Connection(
            fd: fd, loop: listener.loop, id: TCPServer.nextID.wrappingAdd(1, ordering: .relaxed).oldValue,
            remoteAddress: remote, readBuffer: listener.readBuffer, maxOutboundBytes: options.maxOutboundBytes,
            slowReaderTimeout: options.slowReaderTimeout)
        connection.handler = makeHandler(connection)
        connection.onClose = { [weak listener, self] closed in
            listener?.connections[closed.id] = nil
            self.open.subtract(1, ordering: .relaxed)
        }
        listener.connections[connection.id] = connection
        do {
            try connection.activate()
        } catch {
            connection.close(immediately: true)
            return
        }
        if let tls = options.tls {
            do {
                connection.startTLS(try tls.makeSession(), handshakeTimeout: tls.handshakeTimeout)
            } catch {
                Logger(label: "net").error("cannot start a TLS session", [("error", "\(error)")])
                connection.close(immediately: true)
            }
        }
    }

    static func listenSocket(host: String, port: Int, backlog: Int) throws(NetError) -> Int32 {
        let address = try SocketAddress(host: host, port: port)
        let fd = Glibc.socket(address.family, PARLEY_SOCK_STREAM | PARLEY_SOCK_NONBLOCK_CLOEXEC, 0)
        guard fd >= 0 else { throw NetError.lastError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = address.withSockAddr { Glibc.bind(fd, $0, $1) }
        guard bound == 0 else {
            let error = NetError.lastError("bind \(address)")
            Glibc.close(fd)
            throw error
        }
        guard Glibc.listen(fd, Int32(backlog)) == 0 else {
            let error = NetError.lastError("listen")
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return withUnsafePointer(to: &storage) { pointer -> Int in
            if Int32(pointer.pointee.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}

/// One loop's listening socket and the connections it accepted. Owned by `loop`'s thread.
private final class Listener: IOHandler, @unchecked Sendable {
    let loop: EventLoop
    let readBuffer = ReadBuffer(capacity: 64 * 1024)
    var connections: [UInt64: Connection] = [:]
    private var fd: Int32 = -1
    private weak var server: TCPServer?
    private var backoff: TimerID?

    init(loop: EventLoop) {
        self.loop = loop
    }

    func start(fd: Int32, server: TCPServer) {
        self.fd = fd
        self.server = server
        do {
            try loop.register(fd: fd, interest: .readable, handler: self)
        } catch {
            Logger(label: "net").error("cannot watch listener", [("error", "\(error)")])
        }
    }

    func handleReadable() {
        guard fd >= 0, let server else { return }
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { parley_accept4(fd, $0, &length, PARLEY_SOCK_NONBLOCK_CLOEXEC) }
            }
            if client < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK: return
                case EINTR, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop accepting briefly instead of spinning.
                    loop.setInterest(fd: fd, .none)
                    backoff = loop.schedule(after: .milliseconds(100)) { [weak self] in
                        guard let self, self.fd >= 0 else { return }
                        self.backoff = nil
                        self.loop.setInterest(fd: self.fd, .readable)
                    }
                    return
                default:
                    return
                }
            }
            let remote = withUnsafePointer(to: &storage) { SocketAddress.describe($0) }
            server.admit(fd: client, remote: remote, listener: self)
        }
    }

    func handleWritable() {}

    func quiesce() {
        stopListening()
        for connection in Array(connections.values) {
            if let handler = connection.handler {
                handler.connectionShouldQuiesce(connection)
            } else {
                connection.close()
            }
        }
    }

    func closeAll() {
        stopListening()
        for connection in Array(connections.values) { connection.close(immediately: true) }
    }

    private func stopListening() {
        guard fd >= 0 else { return }
        if let backoff { loop.cancel(backoff) }
        loop.deregister(fd: fd)
        Glibc.close(fd)
        fd = -1
    }
}
