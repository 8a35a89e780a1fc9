import ParleyKit
import ParleyNet
import ParleyWebSocket

/// ParleyKit's socket on Parley's own event loops and TCP client (Linux): `ws://`, or `wss://`
/// for an `https` server, verifying its chain and host name (SNI and ALPN `http/1.1` sent).
/// Each socket lives on one loop; calls from other threads hop there.
public final class LinuxTransport: ParleyTransport, Sendable {
    public let group: EventLoopGroup
    /// Resolves host names (blocking `getaddrinfo`); numeric hosts need none.
    public let blockingPool: BlockingPool?
    /// Limits and the close timeout of each socket (pings come from the core, so none here).
    public let socketConfiguration: WebSocketHandler.Configuration
    /// The connect, TLS handshake and upgrade deadline.
    public let connectTimeout: Duration
    private let tls: ClientTLSContext

    /// `tlsCAFile`: the PEM CA bundle `wss` servers are verified against; nil = the system store.
    public init(group: EventLoopGroup, blockingPool: BlockingPool? = nil, connectTimeout: Duration = .seconds(10),
                tlsCAFile: String? = nil,
                socketConfiguration: WebSocketHandler.Configuration = .init(
                    limits: .init(maxFrameSize: 1 << 20, maxMessageSize: 1 << 20), pingInterval: nil,
                    pongTimeout: .seconds(10), closeTimeout: .seconds(5), maxPendingOutboundBytes: 8 << 20)) {
        self.group = group
        self.blockingPool = blockingPool
        self.connectTimeout = connectTimeout
        self.socketConfiguration = socketConfiguration
        tls = ClientTLSContext(caFile: tlsCAFile)
    }

    /// The PEM CA bundle `wss` servers are verified against; nil = the system store.
    public var tlsCAFile: String? { tls.caFile }

    public func open(url: ParleyServerURL, events: ParleySocketEvents) -> any ParleySocket {
        let socket = LinuxSocket(loop: group.next(), events: events)
        var tls: (context: TLSContext, serverName: String)?
        if url.secure {
            do throws(TLSError) {
                tls = (try self.tls.get(), url.host)
            } catch {
                socket.loop.execute { socket.refused(error) }
                return socket
            }
        }
        let configuration = socketConfiguration
        let timeout = connectTimeout
        let start: @Sendable ([SocketAddress]) -> Void = { [tls] addresses in
            socket.loop.execute {
                socket.connect(to: addresses[...], authority: url.authority, tls: tls, timeout: timeout, configuration: configuration)
            }
        }
        if let numeric = try? SocketAddress(host: url.host, port: url.port) {
            start([numeric])
        } else if let blockingPool {
            do {
                try blockingPool.submit {
                    do {
                        start(try TCPClient.resolve(host: url.host, port: url.port))
                    } catch {
                        socket.loop.execute { socket.failed("cannot resolve \(url.host): \(error)") }
                    }
                }
            } catch {
                socket.loop.execute { socket.failed("cannot resolve \(url.host): \(error)") }
            }
        } else {
            socket.loop.execute { socket.failed("\(url.host) is not numeric and no blocking pool resolves names") }
        }
        return socket
    }
}

/// One client WebSocket; all state on `loop`.
final class LinuxSocket: ParleySocket, WebSocketDelegate, @unchecked Sendable {
    let loop: EventLoop
    private let events: ParleySocketEvents
    // Loop-thread state.
    private var handler: WebSocketHandler?
    private var closeRequested: (code: Int, reason: String)?
    private var finished = false
    private var paused = false

    init(loop: EventLoop, events: ParleySocketEvents) {
        self.loop = loop
        self.events = events
    }

    /// Connects to the first of `addresses` that takes the TCP connection (a name may resolve
    /// to an IPv6 and an IPv4 address, only one of them listening).
    func connect(to addresses: ArraySlice<SocketAddress>, authority: String, tls: (context: TLSContext, serverName: String)?, timeout: Duration,
                 configuration: WebSocketHandler.Configuration) {
        guard closeRequested == nil else { return failed("closed before connecting") }
        guard let address = addresses.first else { return failed("no address") }
        WebSocketClient.connect(to: address, authority: authority, target: "/v1/socket", extraHeaders: [("User-Agent", "ParleyKit")],
                                tls: tls, on: loop, timeout: timeout, configuration: configuration, delegate: self) { [self] result in
            switch result {
            case .success: break
            case .failure(.connect) where addresses.count > 1:
                connect(to: addresses.dropFirst(), authority: authority, tls: tls, timeout: timeout, configuration: configuration)
            case .failure(.tls(let error)) where error.isRefusal: refused(error)
            case .failure(let error): failed(error.description)
            }
        }
    }

    /// The socket dropped before or without a close frame: the client reconnects.
    func failed(_ reason: String) {
        finish(code: 1006, reason: reason)
    }

    /// TLS was refused (1015, RFC 6455's code for it): the client stops with `ParleyError.tls`.
    func refused(_ error: TLSError) {
        finish(code: 1015, reason: error.refusalReason)
    }

    private func finish(code: Int, reason: String) {
        guard !finished else { return }
        finished = true
        events.closed(code: code, reason: reason)
    }

    // MARK: ParleySocket (any thread)

    func send(_ text: String) {
        if loop.inEventLoop { handler?.sendText(text); return }
        loop.execute { [self] in handler?.sendText(text) }
    }

    func sendPing() {
        loop.execute { [self] in handler?.sendPing() }
    }

    func close(code: Int, reason: String) {
        loop.execute { [self] in
            closeRequested = (code, reason)
            if let handler { handler.close(code: WebSocketCloseCode(UInt16(clamping: code)), reason: reason) }
        }
    }

    func pauseReading() {
        loop.execute { [self] in
            paused = true
            handler?.connection.pauseReading()
        }
    }

    func resumeReading() {
        loop.execute { [self] in
            paused = false
            handler?.connection.resumeReading()
        }
    }

    // MARK: WebSocketDelegate (loop thread)

    func webSocketDidOpen(_ socket: WebSocketHandler) {
        handler = socket
        if let closeRequested {
            socket.close(code: WebSocketCloseCode(UInt16(clamping: closeRequested.code)), reason: closeRequested.reason)
            return
        }
        if paused { socket.connection.pauseReading() }
        events.opened()
    }

    func webSocket(_ socket: WebSocketHandler, didReceiveText text: String) {
        events.received(text)
    }

    func webSocketDidReceivePong(_ socket: WebSocketHandler) {
        events.activity()
    }

    func webSocket(_ socket: WebSocketHandler, didClose code: WebSocketCloseCode, reason: String) {
        handler = nil
        guard !finished else { return }
        finished = true
        events.closed(code: Int(code.rawValue), reason: reason)
    }
}
