import ParleyNet

/// One request waiting for or holding a connection: its bytes, its deadline and whoever waits
/// for the response. Owned by one loop's thread.
final class HTTPClientExchange {
    let request: HTTPClientRequest
    let bytes: [UInt8]
    /// How many connections the request was sent on (a stale kept-alive one may add one).
    var attempts = 0
    var timer: TimerID?
    weak var connection: HTTPClientConnection?
    private var completion: ((Result<HTTPClientResponse, HTTPClientError>) -> Void)?
    private let loop: EventLoop

    init(request: HTTPClientRequest, bytes: [UInt8], loop: EventLoop, completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        self.request = request
        self.bytes = bytes
        self.loop = loop
        self.completion = completion
    }

    /// Whether the result was delivered (response, error or timeout).
    var isDone: Bool { completion == nil }

    /// Delivers the result once; later calls do nothing.
    func complete(_ result: Result<HTTPClientResponse, HTTPClientError>) {
        guard let completion else { return }
        self.completion = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        connection = nil
        completion(result)
    }
}

/// A kept-alive client connection to one origin: sends one request at a time (no pipelining)
/// and parses its response. Owned by the pool's loop thread. It keeps its pool alive until it
/// closes (the pool forgets it then), so an open connection always has a pool to report to.
final class HTTPClientConnection: ConnectionHandler {
    let connection: Connection
    private let pool: HTTPClientHostPool
    private var parser: HTTPResponseParser
    private(set) var exchange: HTTPClientExchange?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    /// Responses completed on this connection.
    private(set) var served = 0
    private var idleTimer: TimerID?

    init(connection: Connection, pool: HTTPClientHostPool, limits: HTTPResponseParser.Limits) {
        self.connection = connection
        self.pool = pool
        parser = HTTPResponseParser(limits: limits)
    }

    /// Sends the exchange's request; the connection must be idle.
    func start(_ exchange: HTTPClientExchange) {
        precondition(self.exchange == nil, "a client connection carries one request at a time")
        if let idleTimer { connection.loop.cancel(idleTimer) }
        idleTimer = nil
        self.exchange = exchange
        exchange.connection = self
        exchange.attempts += 1
        parser.startResponse(to: exchange.request.method)
        head = nil
        body = []
        connection.write(exchange.bytes)
    }

    /// Closes the connection after `timeout` unless a request starts first.
    func becameIdle(timeout: Duration) {
        idleTimer = connection.loop.schedule(after: timeout) { [weak self] in
            self?.idleTimer = nil
            self?.connection.close()
        }
    }

    /// Drops the current request (timed out) and closes: its response can no longer be matched.
    func abandon() {
        exchange = nil
        connection.close(immediately: true)
    }

    /// The TLS handshake failed: the request fails with the reason (the connection closes).
    func tlsFailed(_ error: TLSError) {
        fail(.tls(error))
    }

    // MARK: ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        guard exchange != nil else {
            // Nothing was asked: the server is confused or the bytes belong to an abandoned request.
            connection.close(immediately: true)
            return
        }
        parser.append(bytes)
        do {
            while let event = try parser.next() {
                switch event {
                case .head(let received):
                    head = received
                case .body(let part):
                    body.append(contentsOf: part)
                case .end:
                    finishResponse()
                    return
                }
            }
        } catch {
            fail(.invalidResponse(error))
            connection.close(immediately: true)
        }
    }

    func connectionDidReceiveEOF(_ connection: Connection) {
        endOfStream()
        connection.close()
    }

    func connectionDidClose(_ connection: Connection) {
        if let idleTimer { connection.loop.cancel(idleTimer) }
        idleTimer = nil
        endOfStream()
        pool.connectionClosed(self)
    }

    func connectionShouldQuiesce(_ connection: Connection) {
        if exchange == nil { connection.close() }
    }

    // MARK: Completion

    private func endOfStream() {
        guard exchange != nil else { return }
        do {
            if case .end? = try parser.finish() { finishResponse() }
        } catch {
            lost(error)
        }
    }

    private func finishResponse() {
        guard let exchange, let head else { return }
        self.exchange = nil
        served += 1
        let reusable = parser.keepAlive && !parser.hasBufferedBytes && connection.isOpen
        let response = HTTPClientResponse(head: head, body: body)
        self.head = nil
        body = []
        exchange.complete(.success(response))
        if reusable {
            pool.release(self)
        } else {
            connection.close()
        }
    }

    /// The connection ended before the response did: a kept-alive connection that the server
    /// closed as the request went out is retried once on a new one; anything else fails.
    private func lost(_ error: HTTPResponseParserError) {
        guard let exchange else { return }
        self.exchange = nil
        guard !exchange.isDone else { return }
        if error == .closedBeforeResponse, served > 0, exchange.request.retryOnStaleConnection, exchange.attempts < 2 {
            exchange.connection = nil
            pool.execute(exchange)
            return
        }
        switch error {
        case .closedBeforeResponse, .truncatedResponse: exchange.complete(.failure(.connectionClosed))
        default: exchange.complete(.failure(.invalidResponse(error)))
        }
    }

    private func fail(_ error: HTTPClientError) {
        guard let exchange else { return }
        self.exchange = nil
        exchange.complete(.failure(error))
    }
}
