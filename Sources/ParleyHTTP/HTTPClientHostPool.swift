import ParleyNet

/// The connections of one loop to one origin (host and port): idle kept-alive connections,
/// connections being made, and requests waiting for one. Owned by `loop`'s thread.
final class HTTPClientHostPool {
    let loop: EventLoop
    /// Where new connections go, in order of preference (refreshed by `HTTPClient` on resolve).
    var addresses: [SocketAddress]
    private let configuration: HTTPClient.Configuration
    /// For an `https` origin: the verification context and the name the certificate must carry.
    private let tls: (context: TLSContext, serverName: String)?
    private var idle: [HTTPClientConnection] = []
    private var live: [ObjectIdentifier: HTTPClientConnection] = [:]
    /// Connections open or being made.
    private(set) var openCount = 0
    private var waiting: [HTTPClientExchange] = []
    private var waitingHead = 0
    private var isShutDown = false

    init(loop: EventLoop, addresses: [SocketAddress], tls: (context: TLSContext, serverName: String)?, configuration: HTTPClient.Configuration) {
        self.loop = loop
        self.addresses = addresses
        self.tls = tls
        self.configuration = configuration
    }

    /// Idle connections (for tests and metrics).
    var idleCount: Int { idle.count }

    /// Sends the exchange on an idle connection, a new one (within the per-host limit), or
    /// queues it (within the queue limit).
    func execute(_ exchange: HTTPClientExchange) {
        loop.preconditionInEventLoop()
        guard !isShutDown else { return exchange.complete(.failure(.shutDown)) }
        while let client = idle.popLast() {
            if client.connection.isOpen {
                client.start(exchange)
                return
            }
        }
        if openCount < configuration.maxConnectionsPerHost {
            connect(for: exchange)
            return
        }
        guard waiting.count - waitingHead < configuration.maxQueuedRequestsPerHost else {
            return exchange.complete(.failure(.tooManyQueuedRequests))
        }
        waiting.append(exchange)
    }

    /// Forgets a queued exchange that timed out.
    func dropWaiting(_ exchange: HTTPClientExchange) {
        if let index = waiting[waitingHead...].firstIndex(where: { $0 === exchange }) { waiting.remove(at: index) }
    }

    /// A connection finished its response and may carry another request.
    func release(_ client: HTTPClientConnection) {
        if let next = nextWaiting() {
            client.start(next)
            return
        }
        if isShutDown {
            client.connection.close()
            return
        }
        idle.append(client)
        client.becameIdle(timeout: configuration.idleTimeout)
    }

    /// A connection closed (after its handler failed or finished its request).
    func connectionClosed(_ client: HTTPClientConnection) {
        guard live.removeValue(forKey: ObjectIdentifier(client)) != nil else { return }
        openCount -= 1
        idle.removeAll { $0 === client }
        if let next = nextWaiting() { connect(for: next) }
    }

    /// Fails every queued and in-flight request and closes every connection.
    func shutdown() {
        isShutDown = true
        while let exchange = nextWaiting() { exchange.complete(.failure(.shutDown)) }
        for client in Array(live.values) {
            client.exchange?.complete(.failure(.shutDown))
            client.connection.close(immediately: true)
        }
        idle.removeAll()
    }

    private func nextWaiting() -> HTTPClientExchange? {
        while waitingHead < waiting.count {
            let exchange = waiting[waitingHead]
            waitingHead += 1
            if waitingHead == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                waitingHead = 0
            } else if waitingHead > 64 && waitingHead * 2 > waiting.count {
                waiting.removeFirst(waitingHead)
                waitingHead = 0
            }
            if !exchange.isDone { return exchange }
        }
        return nil
    }

    private func connect(for exchange: HTTPClientExchange?) {
        openCount += 1
        attemptConnect(addressIndex: 0, for: exchange)
    }

    private func attemptConnect(addressIndex: Int, for exchange: HTTPClientExchange?) {
        guard addressIndex < addresses.count else {
            openCount -= 1
            exchange?.complete(.failure(.connectFailed(.invalidAddress("no address"))))
            return
        }
        let address = addresses[addressIndex]
        let options = TCPClient.Options(maxOutboundBytes: configuration.maxRequestBytes + 64 * 1024)
        TCPClient.connect(to: address, on: loop, timeout: configuration.connectTimeout, options: options) { [self] result in
            switch result {
            case .success(let connection):
                let client = HTTPClientConnection(connection: connection, pool: self, limits: configuration.responseLimits)
                connection.handler = client
                live[ObjectIdentifier(client)] = client
                if let tls, !isShutDown {
                    do throws(TLSError) {
                        let session = try TLSConnection(context: tls.context, serverName: tls.serverName)
                        connection.startTLS(session, handshakeTimeout: configuration.connectTimeout) { [weak client] result in
                            if case .failure(let error) = result { client?.tlsFailed(error) }
                        }
                    } catch {
                        exchange?.complete(.failure(.tls(error)))
                        connection.close(immediately: true)
                        return
                    }
                }
                if isShutDown {
                    connection.close(immediately: true)
                } else if let exchange, !exchange.isDone {
                    client.start(exchange)
                } else {
                    release(client)
                }
            case .failure(let error):
                if addressIndex + 1 < addresses.count {
                    attemptConnect(addressIndex: addressIndex + 1, for: exchange)
                    return
                }
                openCount -= 1
                exchange?.complete(.failure(.connectFailed(error)))
                if let next = nextWaiting() { connect(for: next) }
            }
        }
    }
}
