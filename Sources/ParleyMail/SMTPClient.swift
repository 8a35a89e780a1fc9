import ParleyNet
import Synchronization

/// Delivers mails to one SMTP server on the event loops: a connection per mail, non-blocking,
/// every reply awaited with a timeout and the whole delivery with a deadline.
public final class SMTPClient: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var security: SMTPSecurity
        public var credentials: SMTPCredentials?
        /// Send credentials over a connection that is not encrypted (a relay on localhost, say).
        public var allowInsecureAuthentication: Bool
        /// The name given in EHLO.
        public var heloName: String
        public var connectTimeout: Duration
        /// Longest wait for one reply.
        public var commandTimeout: Duration
        /// Longest time for one whole delivery.
        public var deliveryTimeout: Duration
        /// PEM CA bundle the server is verified against (STARTTLS and implicit TLS); nil = the system store.
        public var tlsCAFile: String?

        public init(host: String, port: Int = 587, security: SMTPSecurity = .startTLS, credentials: SMTPCredentials? = nil,
                    allowInsecureAuthentication: Bool = false, heloName: String = "localhost", connectTimeout: Duration = .seconds(10),
                    commandTimeout: Duration = .seconds(30), deliveryTimeout: Duration = .seconds(60), tlsCAFile: String? = nil) {
            self.host = host
            self.port = port
            self.security = security
            self.credentials = credentials
            self.allowInsecureAuthentication = allowInsecureAuthentication
            self.heloName = heloName
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
            self.deliveryTimeout = deliveryTimeout
            self.tlsCAFile = tlsCAFile
        }
    }

    public let configuration: Configuration
    private let group: EventLoopGroup
    private let blockingPool: BlockingPool?
    /// The verification context for STARTTLS and implicit TLS, made on first use.
    private let tls: Mutex<Result<TLSContext, TLSError>?> = Mutex(nil)

    /// `blockingPool` resolves the host name (not needed for a numeric address).
    public init(group: EventLoopGroup, configuration: Configuration, blockingPool: BlockingPool? = nil) {
        self.group = group
        self.configuration = configuration
        self.blockingPool = blockingPool
    }

    /// Delivers `message` (rendered RFC 5322 bytes) from `sender` to `recipient`; returns the
    /// server's acceptance reply.
    public func deliver(_ message: [UInt8], from sender: String, to recipient: String) async throws(SMTPError) -> SMTPReply {
        let tls = configuration.security == .none ? nil : try tlsContext()
        let addresses = try await resolve()
        let loop: EventLoop
        if let current = EventLoop.current, current.index < group.loops.count, group.loops[current.index] === current {
            loop = current
        } else {
            loop = group.next()
        }
        let machine = SMTPSessionStateMachine(
            settings: .init(heloName: configuration.heloName, security: configuration.security, credentials: configuration.credentials,
                            allowInsecureAuthentication: configuration.allowInsecureAuthentication),
            sender: sender, recipient: recipient, message: message, isEncrypted: configuration.security == .tls)
        let configuration = self.configuration
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<SMTPReply, SMTPError>, Never>) in
            loop.execute {
                SMTPSession.start(machine: machine, addresses: addresses, loop: loop, configuration: configuration, tls: tls) {
                    continuation.resume(returning: $0)
                }
            }
        }
        return try result.get()
    }

    private func tlsContext() throws(SMTPError) -> TLSContext {
        let caFile = configuration.tlsCAFile
        let result = tls.withLock { cached in
            if let cached { return cached }
            let made: Result<TLSContext, TLSError>
            do throws(TLSError) {
                made = .success(try TLSContext.client(caFile: caFile))
            } catch {
                made = .failure(error)
            }
            cached = made
            return made
        }
        switch result {
        case .success(let context): return context
        case .failure(let error): throw .tls(error)
        }
    }

    private func resolve() async throws(SMTPError) -> [SocketAddress] {
        let host = configuration.host, port = configuration.port
        if let numeric = try? SocketAddress(host: host, port: port) { return [numeric] }
        guard let blockingPool else { throw .unresolvedHost(host) }
        do {
            return try await blockingPool.run { try TCPClient.resolve(host: host, port: port) }
        } catch {
            throw .unresolvedHost(host)
        }
    }
}

/// One delivery's connection: feeds replies to the state machine and runs its actions.
/// Owned by `loop`'s thread.
final class SMTPSession: ConnectionHandler {
    private var machine: SMTPSessionStateMachine
    private let loop: EventLoop
    private let configuration: SMTPClient.Configuration
    private let tls: TLSContext?
    private var parser = SMTPReplyParser()
    private var connection: Connection?
    private var completion: ((Result<SMTPReply, SMTPError>) -> Void)?
    private var replyTimer: TimerID?
    private var deadline: TimerID?

    private init(machine: SMTPSessionStateMachine, loop: EventLoop, configuration: SMTPClient.Configuration, tls: TLSContext?,
                 completion: @escaping (Result<SMTPReply, SMTPError>) -> Void) {
        self.machine = machine
        self.loop = loop
        self.configuration = configuration
        self.tls = tls
        self.completion = completion
    }

    static func start(machine: SMTPSessionStateMachine, addresses: [SocketAddress], loop: EventLoop, configuration: SMTPClient.Configuration,
                      tls: TLSContext?, completion: @escaping (Result<SMTPReply, SMTPError>) -> Void) {
        let session = SMTPSession(machine: machine, loop: loop, configuration: configuration, tls: tls, completion: completion)
        session.deadline = loop.schedule(after: configuration.deliveryTimeout) { [session] in
            session.deadline = nil
            session.finish(.failure(.timedOut("delivering the mail")))
        }
        session.connect(addresses, index: 0)
    }

    private func connect(_ addresses: [SocketAddress], index: Int) {
        guard index < addresses.count else { return finish(.failure(.connectFailed(.invalidAddress("no address")))) }
        TCPClient.connect(to: addresses[index], on: loop, timeout: configuration.connectTimeout,
                          options: TCPClient.Options(maxOutboundBytes: MailMessage.maxBodyBytes * 4 + 64 * 1024)) { [self] result in
            switch result {
            case .success(let connection):
                guard completion != nil else { return connection.close(immediately: true) }
                self.connection = connection
                connection.handler = self
                armReplyTimer("waiting for the greeting")
                if configuration.security == .tls { encrypt(connection) {} }
            case .failure(let error):
                if index + 1 < addresses.count { return connect(addresses, index: index + 1) }
                finish(.failure(.connectFailed(error)))
            }
        }
    }

    private func armReplyTimer(_ what: String) {
        if let replyTimer { loop.cancel(replyTimer) }
        replyTimer = loop.schedule(after: configuration.commandTimeout) { [weak self] in
            self?.replyTimer = nil
            self?.finish(.failure(.timedOut(what)))
        }
    }

    private func run(_ action: SMTPSessionStateMachine.Action) {
        switch action {
        case .send(let bytes):
            connection?.write(bytes)
            armReplyTimer("waiting for a reply")
        case .startTLS:
            startTLS()
        case .delivered(let reply):
            connection?.write(machine.quit())
            finish(.success(reply), closeGracefully: true)
        case .fail(let error):
            finish(.failure(error))
        case .wait:
            break
        }
    }

    /// The STARTTLS upgrade after the server's 220: bytes the server sent after that reply
    /// (before the handshake) are refused, since they would be taken as coming over TLS.
    private func startTLS() {
        guard let connection else { return }
        guard !parser.hasBufferedBytes else { return finish(.failure(.protocolViolation("data after the STARTTLS reply"))) }
        armReplyTimer("the TLS handshake")
        encrypt(connection) { [self] in run(machine.tlsEstablished()) }
    }

    /// Puts TLS on the connection, verifying the server against `configuration.host`;
    /// `established` runs once the handshake is done, a failure ends the delivery.
    private func encrypt(_ connection: Connection, established: @escaping () -> Void) {
        guard let tls else { return finish(.failure(.tls(.configuration("no TLS context")))) }
        let session: TLSConnection
        do throws(TLSError) {
            session = try TLSConnection(context: tls, serverName: configuration.host)
        } catch {
            return finish(.failure(.tls(error)))
        }
        connection.startTLS(session, handshakeTimeout: configuration.commandTimeout) { [weak self] result in
            switch result {
            case .success: established()
            case .failure(let error): self?.finish(.failure(.tls(error)))
            }
        }
    }

    private func finish(_ result: Result<SMTPReply, SMTPError>, closeGracefully: Bool = false) {
        if let replyTimer { loop.cancel(replyTimer) }
        replyTimer = nil
        if let deadline { loop.cancel(deadline) }
        deadline = nil
        if let connection {
            self.connection = nil
            connection.close(immediately: !closeGracefully)
        }
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }

    // MARK: ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        guard completion != nil else { return }
        parser.append(bytes)
        do {
            while completion != nil, let reply = try parser.next() {
                run(machine.receive(reply))
            }
        } catch {
            finish(.failure(error))
        }
    }

    func connectionDidReceiveEOF(_ connection: Connection) {
        finish(.failure(.connectionClosed))
    }

    func connectionDidClose(_ connection: Connection) {
        if self.connection === connection { self.connection = nil }
        finish(.failure(.connectionClosed))
    }
}
