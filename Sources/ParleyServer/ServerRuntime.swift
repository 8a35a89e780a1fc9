#if canImport(Glibc)
import Glibc
#endif
import ParleyAccounts
import ParleyCalls
import ParleyCloud
import ParleyFiles
import ParleyHTTP
import ParleyIdentity
import ParleyLog
import ParleyMail
import ParleyNet
import ParleyParse
import ParleyPostgres
import ParleyPush
import ParleyRealtime
import Synchronization

/// Everything a running node owns, started in dependency order and stopped in reverse.
public final class ServerRuntime: Sendable {
    public let config: ServerConfig
    public let group: EventLoopGroup
    public let blockingPool: BlockingPool
    public let database: PostgresClient
    public let metrics: ServerMetrics
    /// The realtime service (/v1/socket, /v1/messages).
    public let realtime: RealtimeService
    /// Call signalling (call.* on /v1/socket, /v1/calls, /v1/turn).
    public let calls: CallService
    /// Users, sessions, objects and installations (the Parse API's domain); observe
    /// `accounts.events` to react to bans and revoked sessions.
    public let accounts: Accounts
    /// Push delivery: jobs for offline devices, sent to the gateway.
    public let push: PushService
    /// The enabled login providers for authData (the accounts module calls them).
    public let identity: AuthProviders
    /// Outgoing mail: the durable outbox and its SMTP worker.
    public let mail: MailService
    /// Cloud Code webhooks: hooks, functions, triggers, jobs.
    public let cloud: CloudCode
    /// The Parse-compatible REST API.
    public let parse: ParseAPI
    private let resuming = Atomic<Bool>(false)
    private let embedded: EmbeddedPostgres?
    private let http: HTTPServer
    /// The listener's certificates (reloaded on SIGHUP); nil without TLS.
    private let tls: TLSServerContext?
    private let logger: Logger

    /// Provisions the database and applies migrations (blocking), then builds the services.
    public init(config: ServerConfig, logger: Logger) throws {
        self.config = config
        self.logger = logger
        let provisioned = try DatabaseProvisioner(databaseURL: config.databaseURL, dataDirectory: config.dataDirectory).provision(ownAdopted: true)
        embedded = provisioned.embedded
        do {
            let applied = try MigrationRunner.apply(
                connectionString: provisioned.connectionString,
                directory: config.migrationsDirectory.isEmpty ? nil : config.migrationsDirectory)
            if !applied.isEmpty { logger.info("migrations applied", [("count", "\(applied.count)")]) }
            group = try EventLoopGroup(threads: config.threads)
            blockingPool = try BlockingPool(threads: config.blockingThreads)
        } catch {
            try? provisioned.embedded?.stop()
            throw error
        }
        database = PostgresClient(group: group, configuration: PostgresConfiguration(
            connectionString: provisioned.connectionString,
            connectionsPerLoop: config.databasePoolSize,
            statementTimeout: config.statementTimeout))
        metrics = ServerMetrics()

        let router = Router()
        HealthEndpoints(database: database, metrics: metrics, metricsToken: config.metricsToken).register(on: router)
        router.add(middleware: RequestLogMiddleware())
        push = PushService(database: database, group: group, configuration: config.push, blockingPool: blockingPool,
                           metrics: metrics.registry, logger: Logger(label: "push"))
        identity = AuthProviders(configuration: config.identity, group: group, blockingPool: blockingPool, logger: Logger(label: "identity"))
        mail = MailService(database: database, group: group, configuration: config.mail, blockingPool: blockingPool,
                           metrics: metrics.registry, logger: Logger(label: "mail"))
        accounts = Accounts(database: database, blockingPool: blockingPool, configuration: config.accounts,
                            authData: IdentityAuthDataVerifier(providers: identity, logger: Logger(label: "identity")),
                            mailer: MailAccountMailer(mail: mail), logger: Logger(label: "accounts"))
        realtime = RealtimeService(database: database, group: group, configuration: config.realtime,
                                   authenticator: AccountsRealtimeAuthenticator(accounts: accounts), observer: push,
                                   metrics: metrics.registry, logger: Logger(label: "realtime"))
        realtime.register(on: router)
        calls = CallService(group: group, store: CallStore(database: database, nodeId: realtime.nodeID,
                                                           existingUsers: Accounts.existingUsersFunction, readsCalleeDevices: true),
                            transport: RealtimeCallTransport(realtime: realtime), configuration: config.calls,
                            metrics: metrics.registry, logger: Logger(label: "calls"))
        realtime.register(handler: CallFrameHandler(calls: calls, realtime: realtime), forTypePrefix: "call.")
        CallEndpoints(calls: calls, authenticator: realtime.authenticator).register(on: router)
        cloud = CloudCode(database: database, group: group, configuration: config.cloud, blockingPool: blockingPool, metrics: metrics.registry,
                          logger: Logger(label: "cloud"))
        let trafficHooks = TrafficHooks(traffic: cloud.traffic, blocks: realtime.blocks)
        realtime.install(messageHooks: trafficHooks)
        calls.install(hooks: trafficHooks)
        let push = self.push
        parse = ParseAPI(configuration: ParseConfiguration(applicationID: config.appID, masterKey: config.masterKey,
                                                   restAPIKey: config.restAPIKey, mountPath: config.mountPath,
                                                   maxAnswerBytes: config.maxAnswerBytes, maxObjectBytes: config.maxObjectBytes,
                                                   sliceAnswersAbove: config.maxOutboundBytes / 2,
                                                   serverURL: ParseServerURL(publicURL: config.publicURL, trustedProxies: config.trustedProxies),
                                                   regexLimit: RegexStatementLimit(timeout: config.regexTimeout, maxConcurrent: config.regexConcurrency),
                                                   loginThrottle: LoginThrottle(perAccount: config.loginFailuresPerAccount,
                                                                                perAddress: config.loginFailuresPerAddress,
                                                                                window: config.loginFailureWindow),
                                                   pages: config.pages, push: ParsePushSettings(maxPaging: config.pushPagingConcurrency, queued: { push.worker.wake() }),
                                                   allowClientClassCreation: config.allowClientClassCreation),
                         accounts: accounts, cloud: cloud,
                         files: ParseFiles(storage: try Self.fileStorage(config.files, group: group, blockingPool: blockingPool, tlsCAFile: config.tlsCAFile),
                                           maxUploadBytes: config.files.maxUploadBytes,
                                           upload: .init(enableForPublic: config.files.enableForPublic,
                                                         enableForAuthenticatedUser: config.files.enableForAuthenticatedUser)),
                         logger: Logger(label: "parse"))
        parse.register(on: router)
        // Revoked sessions and banned or deleted users lose their live sockets at once (4006).
        accounts.events.observe { [realtime] event in
            switch event {
            case .sessionRevoked(let token, let userId): realtime.closeConnections(ofUser: userId, sessionToken: token)
            case .sessionsRevoked(let userId, _, _): realtime.closeConnections(ofUser: userId)
            case .userChanged, .configChanged, .rolesChanged, .schemaChanged: break
            }
        }
        if config.enableTestEndpoints {
            logger.warning("test endpoints enabled")
            TestEndpoints(group: group, mail: mail).register(on: router)
        }

        if let settings = config.tls {
            do {
                tls = try TLSServerContext(certificates: settings.certificates, handshakeTimeout: settings.handshakeTimeout)
            } catch {
                throw ServerError.startFailed("\(error)")
            }
        } else {
            tls = nil
        }
        var limits = HTTPParserLimits()
        limits.maxHeadBytes = config.maxHeaderBytes
        limits.maxHeaderCount = config.maxHeaderCount
        limits.maxBodyBytes = config.maxBodyBytes
        http = HTTPServer(
            group: group,
            configuration: .init(
                host: config.host, port: config.port, maxConnections: config.maxConnections,
                maxOutboundBytes: config.maxOutboundBytes, limits: limits, idleTimeout: config.idleTimeout,
                headerTimeout: config.headerTimeout, bodyTimeout: config.bodyTimeout, slowReaderTimeout: config.slowReaderTimeout,
                tls: tls, tlsPort: config.tls?.port),
            router: router, observer: metrics, logger: Logger(label: "http"))
        let http = self.http
        metrics.watch(openConnections: { http.openConnections() }, database: database, group: group)
    }

    /// The bound HTTP port.
    public var port: Int { http.port }

    /// Connects the database pools and starts listening.
    public func start() throws {
        database.start()
        try loadRealtimeSettings()
        realtime.start()
        calls.start(nodeStaleAfter: config.realtime.nodeStaleAfter, interval: config.calls.nodeSweepInterval)
        accounts.events.startListening(on: group.loops[0], configuration: database.configuration)
        push.start()
        mail.start()
        cloud.start()
        startResumingPushes()
        try http.start()
        logger.info("login providers", [("enabled", config.identity.enabledProviders.joined(separator: ","))])
        var fields = [("host", config.host), ("port", "\(http.port)"), ("threads", "\(group.loops.count)")]
        if let tlsPort = http.tlsPort { fields.append(("tls_port", "\(tlsPort)")) }
        logger.notice("listening", fields)
    }

    /// The bound port of TLS connections, nil without TLS.
    public var tlsPort: Int? { http.tlsPort }

    /// Reads the TLS certificates and keys again (SIGHUP) on the blocking pool: new handshakes
    /// use them, open connections keep theirs; on failure the old ones stay and it is logged.
    public func reloadCertificates() {
        guard let tls else {
            logger.notice("SIGHUP: no TLS certificates to reload")
            return
        }
        let logger = self.logger
        Task { [blockingPool] in
            do {
                let fingerprints = try await blockingPool.run { () throws -> [String] in
                    try tls.reload()
                    return tls.fingerprints
                }
                logger.notice("TLS certificates reloaded", [("sha256", fingerprints.joined(separator: ","))])
            } catch {
                logger.error("TLS certificates not reloaded, the previous ones stay in use", [("error", "\(error)")])
            }
        }
    }

    /// Every 10 s (and now), queues the pages of pushes a stopped node left unfinished.
    private func startResumingPushes() {
        guard !resuming.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let loop = group.loops[0]
        Task(executorPreference: loop) { [self] in
            while resuming.load(ordering: .acquiring) {
                await parse.resumePushes()
                await loop.sleep(for: .seconds(10))
            }
        }
    }

    /// Waits (off the loops) for the realtime service's settings, which device labels need from
    /// the first call on.
    private func loadRealtimeSettings() throws {
        let loaded = Latch()
        let failure = Mutex<(any Error)?>(nil)
        let realtime = self.realtime
        Task {
            do throws(RealtimeFailure) {
                try await realtime.loadSettings()
            } catch {
                failure.withLock { $0 = error }
            }
            loaded.open()
        }
        guard loaded.wait(timeout: config.statementTimeout + .seconds(10)) else { throw ServerError.startFailed("the realtime settings could not be read") }
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Graceful stop: no new connections, in-flight requests finish (bounded by the shutdown
    /// timeout), then connections close, the pools close and the loops stop.
    public func shutdown() {
        http.quiesce()
        let deadline = EventLoop.monotonicNanoseconds() + UInt64(config.shutdownTimeout.components.seconds) * 1_000_000_000
        while http.openConnections() > 0 && EventLoop.monotonicNanoseconds() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 20_000_000)
            nanosleep(&pause, nil)
        }
        if http.openConnections() > 0 {
            logger.warning("closing connections still open at the shutdown deadline", [("open", "\(http.openConnections())")])
        }
        http.closeAll()
        resuming.store(false, ordering: .releasing)
        realtime.shutdown()
        calls.shutdown()
        accounts.events.stopListening()
        push.stop(timeout: config.push.requestTimeout + .seconds(1))
        mail.stop(timeout: (config.mail.smtp?.deliveryTimeout ?? .zero) + .seconds(1))
        cloud.stop(timeout: config.cloud.timeout + .seconds(1))
        identity.shutdown()
        let closed = Latch()
        let database = self.database
        Task {
            await database.shutdown()
            closed.open()
        }
        closed.wait(timeout: .seconds(5))
        group.shutdownGracefully()
        blockingPool.shutdown()
    }

    /// Stops the embedded PostgreSQL, if this node started one.
    public func stopDatabase() {
        guard let embedded else { return }
        do {
            try embedded.stop()
        } catch {
            logger.error("embedded PostgreSQL did not stop cleanly", [("error", "\(error)")])
        }
    }

    /// The storage `--files-storage` names: an S3-compatible bucket, or the files directory.
    static func fileStorage(_ settings: FileSettings, group: EventLoopGroup, blockingPool: BlockingPool, tlsCAFile: String?) throws -> any FileStorage {
        if let s3 = settings.s3 { return S3FileStorage(settings: s3, group: group, blockingPool: blockingPool, tlsCAFile: tlsCAFile) }
        return try DiskFileStorage(directory: settings.directory, pool: blockingPool)
    }
}
