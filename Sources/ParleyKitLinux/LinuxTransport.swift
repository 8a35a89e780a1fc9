import ParleyKit
import ParleyNet
import ParleyWebSocket

/// ParleyKit's socket on Parley's own event loops and TCP client (Linux): plain `ws://` only
/// (put a TLS-terminating proxy in front for `wss`). Each socket lives on one loop; calls from
/// other threads hop there.
public final class LinuxTransport: ParleyTransport, Sendable {
    public let group: EventLoopGroup
    /// Resolves host names (blocking `getaddrinfo`); numeric hosts need none.
    public let blockingPool: BlockingPool?
    /// Limits and the close timeout of each socket (pings come from the core, so none here).
    public let socketConfiguration: WebSocketHandler.Configuration
    public let connectTimeout: Duration

    public init(group: EventLoopGroup, blockingPool: BlockingPool? = nil, connectTimeout: Duration = .seconds(10),
                socketConfiguration: WebSocketHandler.Configuration = .init(
                    limits: .init(maxFrameSize: 1 << 20, maxMessageSize: 1 << 20), pingInterval: nil,
                    pongTimeout: .seconds(10), closeTimeout: .seconds(5), maxPendingOutboundBytes: 8 << 20)) {
        self.group = group
        self.blockingPool = blockingPool
        self.connectTimeout = connectTimeout
        self.socketConfiguration = socketConfiguration
    }

    public func open(url: ParleyServerURL, events: ParleySocketEvents) -> any ParleySocket {
        let socket = LinuxSocket(loop: group.next(), events: events)
        guard !url.secure else {
            socket.loop.execute { socket.failed("wss is not supported by the Linux transport") }
            return socket
        }
        let configuration = socketConfiguration
        let timeout = connectTimeout
        let start: @Sendable (SocketAddress) -> Void = { address in
            socket.loop.execute {
                socket.connect(to: address, authority: url.authority, timeout: timeout, configuration: configuration)
            }
        }
        if let numeric = try? SocketAddress(host: url.host, port: url.port) {
            start(numeric)
        } else if let blockingPool {
            do {
                try blockingPool.submit {
                    do {
                        let addresses = try TCPClient.resolve(host: url.host, port: url.port)
                        start(addresses[0])
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

    func connect(to address: SocketAddress, authority: String, timeout: Duration, configuration: WebSocketHandler.Configuration) {
        guard closeRequested == nil else { return failed("closed before connecting") }
        WebSocketClient.connect(to: address, authority: authority, target: "/v1/socket", extraHeaders: [("User-Agent", "ParleyKit")],
                                on: loop, timeout: timeout, configuration: configuration, delegate: self) { [self] result in
            if case .failure(let error) = result { failed(error.description) }
        }
    }

    func failed(_ reason: String) {
        guard !finished else { return }
        finished = true
        events.closed(code: 1006, reason: reason)
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
