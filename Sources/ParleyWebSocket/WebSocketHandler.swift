import ParleyNet

/// Runs the WebSocket protocol on a `Connection` after the HTTP layer wrote the 101 response.
///
/// Drives a `WebSocketConnectionStateMachine`, hands messages to a `WebSocketDelegate`, pings
/// a peer that has been silent for `pingInterval` and drops it if nothing arrives within
/// `pongTimeout`, bounds the close handshake by `closeTimeout`, and drops a peer that does not
/// read once more than `maxPendingOutboundBytes` are queued for it.
///
/// Thread confinement: owned by `connection.loop`; every method must be called on that loop's
/// thread. The handler keeps its delegate until the connection closes.
public final class WebSocketHandler: ConnectionHandler {
    /// Limits and timers.
    public struct Configuration: Sendable {
        /// Frame and message size limits (1009 above them).
        public var limits: WebSocketConnectionStateMachine.Limits
        /// Ping a peer after this long without receiving anything; nil never pings.
        public var pingInterval: Duration?
        /// Drop a pinged peer that sends nothing back for this long.
        public var pongTimeout: Duration
        /// After we send a close frame, drop the connection if the peer's does not arrive in this time.
        public var closeTimeout: Duration
        /// Drop the connection (without a close frame) when more than this is queued for the peer.
        public var maxPendingOutboundBytes: Int

        public init(
            limits: WebSocketConnectionStateMachine.Limits = .init(),
            pingInterval: Duration? = .seconds(30),
            pongTimeout: Duration = .seconds(10),
            closeTimeout: Duration = .seconds(5),
            maxPendingOutboundBytes: Int = 1 << 20
        ) {
            self.limits = limits
            self.pingInterval = pingInterval
            self.pongTimeout = pongTimeout
            self.closeTimeout = closeTimeout
            self.maxPendingOutboundBytes = maxPendingOutboundBytes
        }
    }

    public let connection: Connection
    public let configuration: Configuration
    private var machine: WebSocketConnectionStateMachine
    private var delegate: (any WebSocketDelegate)?
    private var timer: TimerID?
    private var lastReceived: UInt64 = 0
    private var pingSentAt: UInt64?
    private var dropReason: String?

    /// Installs a handler on `connection` (replacing the HTTP handler), tells the delegate, and
    /// processes `initialBytes` — whatever the HTTP parser read past the upgrade request.
    @discardableResult
    public static func install(
        on connection: Connection, configuration: Configuration = Configuration(),
        delegate: any WebSocketDelegate, initialBytes: [UInt8] = [], role: WebSocketConnectionStateMachine.Role = .server
    ) -> WebSocketHandler {
        connection.loop.preconditionInEventLoop()
        let handler = WebSocketHandler(connection: connection, configuration: configuration, delegate: delegate, role: role)
        connection.handler = handler
        handler.lastReceived = EventLoop.monotonicNanoseconds()
        handler.armIdleTimer(after: configuration.pingInterval)
        delegate.webSocketDidOpen(handler)
        if !initialBytes.isEmpty && !connection.isClosed {
            initialBytes.withUnsafeBytes { handler.connection(connection, didRead: $0) }
        }
        return handler
    }

    private init(connection: Connection, configuration: Configuration, delegate: any WebSocketDelegate,
                 role: WebSocketConnectionStateMachine.Role) {
        self.connection = connection
        self.configuration = configuration
        self.delegate = delegate
        self.machine = WebSocketConnectionStateMachine(limits: configuration.limits, role: role)
    }

    // MARK: Application API

    /// Where the close handshake stands.
    public var state: WebSocketConnectionStateMachine.State { machine.state }
    /// True while messages can be sent.
    public var isOpen: Bool { machine.canSend && connection.isOpen }
    /// Bytes queued for the peer and not yet written (to shed load before the hard bound).
    public var pendingOutboundBytes: Int { connection.pendingOutboundBytes }

    /// Sends a text message; false if the socket is no longer open.
    @discardableResult
    public func sendText(_ text: String) -> Bool {
        guard isOpen else { return false }
        return send(encodedFrame: machine.textFrame(text))
    }

    /// Sends a binary message; false if the socket is no longer open.
    @discardableResult
    public func sendBinary(_ bytes: [UInt8]) -> Bool {
        guard isOpen else { return false }
        return send(encodedFrame: machine.binaryFrame(bytes))
    }

    /// Sends a frame made by `WebSocketFrameEncoder` (encode once, send to many sockets; a
    /// client's frames must be masked, see `textFrame`).
    @discardableResult
    public func send(encodedFrame: [UInt8]) -> Bool {
        connection.loop.preconditionInEventLoop()
        guard isOpen else { return false }
        write(encodedFrame)
        return isOpen
    }

    /// Sends a ping now (a client checking a quiet server); false if the socket is not open.
    @discardableResult
    public func sendPing() -> Bool {
        connection.loop.preconditionInEventLoop()
        guard isOpen, let ping = machine.ping() else { return false }
        write(ping)
        return isOpen
    }

    /// Starts the close handshake; the connection closes when the peer answers or after `closeTimeout`.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") {
        connection.loop.preconditionInEventLoop()
        guard connection.isOpen, let frame = machine.close(code: code, reason: reason) else { return }
        write(frame)
        armTimer(after: configuration.closeTimeout)
    }

    // MARK: ConnectionHandler

    public func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        lastReceived = EventLoop.monotonicNanoseconds()
        var offset = 0
        while !connection.isClosed, let action = machine.next(bytes, offset: &offset) {
            switch action {
            case .send(let frame):
                write(frame)
            case .deliverText(let text):
                delegate?.webSocket(self, didReceiveText: text)
            case .deliverBinary(let bytes):
                delegate?.webSocket(self, didReceiveBinary: bytes)
            case .receivedPong:
                delegate?.webSocketDidReceivePong(self)
            case .closeConnection:
                cancelTimer()
                connection.close()
            }
        }
    }

    public func connectionDidDrain(_ connection: Connection) {
        delegate?.webSocketDidDrain(self)
    }

    public func connectionShouldQuiesce(_ connection: Connection) {
        if machine.state == .open {
            close(code: .goingAway, reason: "server shutting down")
        }
    }

    public func connectionDidClose(_ connection: Connection) {
        cancelTimer()
        machine.connectionDropped()
        let dropped = dropReason.map { WebSocketCloseStatus(code: .abnormalClosure, reason: $0) }
        let status = machine.receivedClose ?? dropped ?? machine.sentClose
            ?? WebSocketCloseStatus(code: .abnormalClosure, reason: "connection dropped")
        let delegate = self.delegate
        self.delegate = nil
        delegate?.webSocket(self, didClose: status.code, reason: status.reason)
    }

    // MARK: Internals

    private func write(_ bytes: [UInt8]) {
        connection.write(bytes)
        if connection.pendingOutboundBytes > configuration.maxPendingOutboundBytes {
            drop("outbound buffer full")
        }
    }

    private func drop(_ reason: String) {
        guard !connection.isClosed else { return }
        dropReason = reason
        machine.connectionDropped()
        cancelTimer()
        connection.close(immediately: true)
    }

    private func armIdleTimer(after delay: Duration?) {
        guard let delay else { return }
        armTimer(after: delay)
    }

    private func armTimer(after delay: Duration) {
        cancelTimer()
        timer = connection.loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.timerFired()
        }
    }

    private func cancelTimer() {
        if let timer { connection.loop.cancel(timer) }
        timer = nil
    }

    private func timerFired() {
        switch machine.state {
        case .closed:
            return
        case .closing:
            drop("close handshake timed out")
        case .open:
            guard let interval = configuration.pingInterval?.nanoseconds else { return }
            let now = EventLoop.monotonicNanoseconds()
            if let sentAt = pingSentAt {
                guard lastReceived > sentAt else {
                    drop("no pong within \(configuration.pongTimeout)")
                    return
                }
                pingSentAt = nil
            }
            let idle = now &- lastReceived
            if idle >= interval, let ping = machine.ping() {
                pingSentAt = now
                write(ping)
                if !connection.isClosed { armTimer(after: configuration.pongTimeout) }
            } else {
                armTimer(after: .nanoseconds(Int64(interval - min(idle, interval))))
            }
        }
    }
}

extension Duration {
    /// The duration in whole nanoseconds, clamped at zero.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }
}
