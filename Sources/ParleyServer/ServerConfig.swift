import ParleyAccounts
import ParleyCalls
import ParleyCloud
import ParleyLog
import ParleyHTTP
import ParleyIdentity
import ParleyMail
import ParleyNet
import ParleyParse
import ParleyPush
import ParleyRealtime

/// Everything `parley serve` can be told, resolved and typed.
public struct ServerConfig: Sendable {
    public var host: String
    public var port: Int
    /// Where to write the bound port once listening (`--port-file`; nil = nowhere).
    public var portFile: String?
    public var threads: Int
    public var blockingThreads: Int
    public var dataDirectory: String
    public var databaseURL: String?
    public var migrationsDirectory: String
    public var logLevel: LogLevel
    public var maxConnections: Int
    public var maxHeaderBytes: Int
    public var maxHeaderCount: Int
    public var maxBodyBytes: Int
    public var maxOutboundBytes: Int
    public var idleTimeout: Duration
    public var headerTimeout: Duration
    public var bodyTimeout: Duration
    public var slowReaderTimeout: Duration
    public var shutdownTimeout: Duration
    public var databasePoolSize: Int
    public var statementTimeout: Duration
    /// `statement_timeout` of a `$regex` find (`--regex-timeout`).
    public var regexTimeout: Duration
    /// `$regex` finds running at once per node (`--regex-concurrency`).
    public var regexConcurrency: Int
    /// Largest Parse answer sent whole, in bytes (`--max-answer-size`).
    public var maxAnswerBytes: Int
    /// Largest object a Parse write may send, in bytes (`--max-object-size`).
    public var maxObjectBytes: Int
    /// Failed logins per account / per client address in `loginFailureWindow` (`--login-*`).
    public var loginFailuresPerAccount: Int
    public var loginFailuresPerAddress: Int
    public var loginFailureWindow: Duration
    public var appID: String
    public var masterKey: String?
    public var restAPIKey: String?
    public var mountPath: String
    /// The server's external URL (`--public-url`), for every URL it hands out; nil: from requests.
    public var publicURL: String?
    /// Peers whose `X-Forwarded-Proto`/`-Host` are believed (`--trusted-proxies`).
    public var trustedProxies: [IPNetwork]
    public var enableTestEndpoints: Bool
    /// Clients may create classes by writing to them (`--allow-client-class-creation`).
    public var allowClientClassCreation: Bool
    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    public var metricsToken: String?
    /// The realtime service's limits (`--realtime-*` options).
    public var realtime: RealtimeConfiguration
    /// Call signalling and TURN (`--call-*`, `--turn-*` options).
    public var calls: CallConfiguration
    /// Users, sessions and password hashing (the `session-*`, `lockout-*`, `password-*` options).
    public var accounts: AccountsConfiguration
    /// The account pages mailed links lead to (`--page-template-dir`).
    public var pages: AccountPages
    /// Push delivery (`--push-*` options).
    public var push: PushConfiguration
    /// `POST /push` requests paged into jobs at once per node (`--push-paging-concurrency`).
    public var pushPagingConcurrency: Int
    /// The app's name (mails, account pages).
    public var appName: String
    /// Login providers for authData (`--auth-*` options).
    public var identity: IdentityConfiguration
    /// Outgoing mail (`--smtp-*`, `--mail-*` options).
    public var mail: MailConfiguration
    /// HTTPS and WSS on the listener (`--tls-*`); nil = plain HTTP only.
    public var tls: TLSSettings?
    /// The CA bundle outgoing TLS is verified against (`--tls-ca-file`); nil = the system store.
    public var tlsCAFile: String?
    /// Cloud Code webhooks (`--webhook-*` options).
    public var cloud: CloudConfiguration
    /// Parse's Files API (`--files-dir`, `--max-upload-size`, `--file-upload-*`).
    public var files: FileSettings

    /// Every option `parley serve` accepts, in `--help` order.
    public static let options: [ConfigOption] = [
        ConfigOption("host", env: "PARLEY_HOST", default: "0.0.0.0", "Address to listen on."),
        ConfigOption("port", env: "PARLEY_PORT", default: "8080", "TCP port to listen on (0 picks a free one)."),
        ConfigOption("port-file", env: "PARLEY_PORT_FILE", default: "", "Once listening, write the bound port to this file (written whole, then renamed into place; with --port 0 it tells which port was picked); with --tls-port, a second line `tls <port>` names the TLS listener's (--tls-port 0 picks one)."),
        ConfigOption("threads", env: "PARLEY_THREADS", default: "0", "Event loops (0 = one per core)."),
        ConfigOption("blocking-threads", env: "PARLEY_BLOCKING_THREADS", default: "0", "Worker threads for blocking work such as password hashing (0 = one per core)."),
        ConfigOption("data-dir", env: "PARLEY_DATA_DIR", default: "./.parley", "Directory for the embedded PostgreSQL cluster and other state."),
        ConfigOption("database-url", env: "DATABASE_URL", default: "", "PostgreSQL connection URL; empty = run an embedded PostgreSQL under --data-dir."),
        ConfigOption("migrations-dir", env: "PARLEY_MIGRATIONS_DIR", default: "", "Directory of numbered SQL migrations to apply instead of those built into the binary (empty = the built-in ones)."),
        ConfigOption("log-level", env: "PARLEY_LOG_LEVEL", default: "info", "trace, debug, info, notice, warning, error or critical."),
        ConfigOption("max-connections", env: "PARLEY_MAX_CONNECTIONS", default: "100000", "Open connections past this are closed at once."),
        ConfigOption("max-header-bytes", env: "PARLEY_MAX_HEADER_BYTES", default: "16384", "Request line plus headers, in bytes (431 past it)."),
        ConfigOption("max-header-count", env: "PARLEY_MAX_HEADER_COUNT", default: "100", "Header fields per request (431 past it)."),
        ConfigOption("max-body-bytes", env: "PARLEY_MAX_BODY_BYTES", default: "1048576", "Request body, in bytes (413 past it)."),
        ConfigOption("max-outbound-bytes", env: "PARLEY_MAX_OUTBOUND_BYTES", default: "4194304", "Queued output per connection; a reader that falls further behind is disconnected."),
        ConfigOption("idle-timeout", env: "PARLEY_IDLE_TIMEOUT", default: "60s", "Keep-alive connections idle this long are closed."),
        ConfigOption("header-timeout", env: "PARLEY_HEADER_TIMEOUT", default: "10s", "Deadline to receive a whole request head once it started (slowloris guard)."),
        ConfigOption("body-timeout", env: "PARLEY_BODY_TIMEOUT", default: "30s", "Deadline to receive a whole request body."),
        ConfigOption("slow-reader-timeout", env: "PARLEY_SLOW_READER_TIMEOUT", default: "30s", "A connection whose queued output the client takes none of for this long is closed, whatever it sends."),
        ConfigOption("shutdown-timeout", env: "PARLEY_SHUTDOWN_TIMEOUT", default: "10s", "On SIGTERM, how long in-flight requests may run before connections are closed."),
        ConfigOption("db-pool-size", env: "PARLEY_DB_POOL_SIZE", default: "2", "PostgreSQL connections per event loop."),
        ConfigOption("db-statement-timeout", env: "PARLEY_DB_STATEMENT_TIMEOUT", default: "5s", "PostgreSQL statement_timeout for every query."),
        ConfigOption("login-failures-per-account", env: "PARLEY_LOGIN_FAILURES_PER_ACCOUNT", default: "10", "Failed logins one username/email may have per --login-failure-window before 100/429 (0 = no limit)."),
        ConfigOption("login-failures-per-address", env: "PARLEY_LOGIN_FAILURES_PER_ADDRESS", default: "100", "Failed logins one client address may have per --login-failure-window before 100/429 (0 = no limit)."),
        ConfigOption("login-failure-window", env: "PARLEY_LOGIN_FAILURE_WINDOW", default: "15m", "How long a failed login counts against its account and address."),
        ConfigOption("regex-timeout", env: "PARLEY_REGEX_TIMEOUT", default: "1s", "statement_timeout of a Parse find with $regex (then 102)."),
        ConfigOption("regex-concurrency", env: "PARLEY_REGEX_CONCURRENCY", default: "2", "Parse finds with $regex running at once per node; more get 100/429 at once."),
        ConfigOption("max-answer-size", env: "PARLEY_MAX_ANSWER_SIZE", default: "67108864",
                     "Largest Parse answer sent whole, in bytes: a single object, a batch's answers together, a find rewritten by afterFind (past it 116). Finds stream page by page and are not bounded by it."),
        ConfigOption("max-object-size", env: "PARLEY_MAX_OBJECT_SIZE", default: "16777216",
                     "Largest object a Parse write may send (its JSON), in bytes; a larger one answers 116. Requests are also bounded by --max-body-bytes."),
        ConfigOption("app-id", env: "PARLEY_APP_ID", default: "parley", "Parse application id clients must send (X-Parse-Application-Id)."),
        ConfigOption("master-key", env: "PARLEY_MASTER_KEY", default: "", "Parse master key (empty = master key disabled)."),
        ConfigOption("rest-api-key", env: "PARLEY_REST_API_KEY", default: "", "Parse REST API key; when set, clients must send it."),
        ConfigOption("mount-path", env: "PARLEY_MOUNT_PATH", default: "/parse", "Where the Parse-compatible REST API is mounted."),
        ConfigOption("public-url", env: "PARLEY_PUBLIC_URL", default: "",
                     "The server's external URL (https://api.example.com, without the mount path), used for Location headers and every URL the server hands out; empty = built from each request's Host."),
        ConfigOption("trusted-proxies", env: "PARLEY_TRUSTED_PROXIES", default: "",
                     "Comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-Proto and X-Forwarded-Host are believed when --public-url is empty (empty = none)."),
        ConfigOption("session-lifetime", env: "PARLEY_SESSION_LIFETIME", default: "365d", "How long a new session token is valid (at least 1 s). A socket opened with the token is closed with 4007 when it expires."),
        ConfigOption("session-cache-ttl", env: "PARLEY_SESSION_CACHE_TTL", default: "30s", "How long a node trusts a cached session before reading it again (bounds how long a session revoked on another node still works here)."),
        ConfigOption("lockout-threshold", env: "PARLEY_LOCKOUT_THRESHOLD", default: "0", "Failed logins in a row that lock an account (0 = no lockout)."),
        ConfigOption("lockout-duration", env: "PARLEY_LOCKOUT_DURATION", default: "5m", "How long a locked account stays locked (whole minutes)."),
        ConfigOption("password-ops-limit", env: "PARLEY_PASSWORD_OPS_LIMIT", default: "2", "argon2id passes per password hash (libsodium interactive = 2)."),
        ConfigOption("password-mem-limit", env: "PARLEY_PASSWORD_MEM_LIMIT", default: "67108864", "argon2id memory per password hash, in bytes (libsodium interactive = 64 MiB)."),
        ConfigOption("password-hash-queue", env: "PARLEY_PASSWORD_HASH_QUEUE", default: "64",
                     "argon2id jobs (logins, signups, password changes) queued or running at once; more are refused at once with 429 (code 100)."),
        ConfigOption("metrics-token", env: "PARLEY_METRICS_TOKEN", default: "", "When set, /metrics answers only requests with Authorization: Bearer <token> (401 otherwise); empty = open."),
        ConfigOption("allow-client-class-creation", env: "PARLEY_ALLOW_CLIENT_CLASS_CREATION", default: "false",
                     "Let clients without the master key use classes that do not exist yet, a first write creating one (off, as Parse Server 7+: classes come from /schemas or the master key).", isSwitch: true),
        ConfigOption("enable-test-endpoints", env: "PARLEY_ENABLE_TEST_ENDPOINTS", default: "false", "Expose /test/* endpoints used by the test suites (never in production).", isSwitch: true),
    ] + realtimeOptions + callOptions + pushOptions + identityOptions + mailOptions + passwordPolicyOptions + tlsOptions + cloudOptions + fileOptions

    /// Options of the realtime service (/v1/socket, /v1/messages).
    static let realtimeOptions: [ConfigOption] = [
        ConfigOption("realtime-retention", env: "PARLEY_REALTIME_RETENTION", default: "30d", "Queued events older than this are dropped (the device is told of the gap); devices unused this long are forgotten."),
        ConfigOption("realtime-retention-interval", env: "PARLEY_REALTIME_RETENTION_INTERVAL", default: "1h", "How often the retention job runs."),
        ConfigOption("realtime-hello-timeout", env: "PARLEY_REALTIME_HELLO_TIMEOUT", default: "10s", "A socket must send hello within this time."),
        ConfigOption("realtime-ping-interval", env: "PARLEY_REALTIME_PING_INTERVAL", default: "30s", "Ping a silent socket after this long; one silent for 10 s more is dropped."),
        ConfigOption("realtime-send-rate", env: "PARLEY_REALTIME_SEND_RATE", default: "100", "Messages a user may send per second (sustained)."),
        ConfigOption("realtime-send-burst", env: "PARLEY_REALTIME_SEND_BURST", default: "200", "Burst allowance of the per-user send rate."),
        ConfigOption("realtime-max-devices", env: "PARLEY_REALTIME_MAX_DEVICES", default: "20",
                     "Devices per user, however they appear (a hello, or an installation linked to the user). Give every node the same value: each records its own with its heartbeat, and the database applies the last one to installations."),
        ConfigOption("realtime-node-stale-after", env: "PARLEY_REALTIME_NODE_STALE_AFTER", default: "45s",
                     "A node silent this long (it heartbeats every 10 s) counts as stopped: its devices offline, its calls lost (over 10s)."),
        ConfigOption("realtime-presence-scope", env: "PARLEY_REALTIME_PRESENCE_SCOPE", default: "contacts",
                     "Whose presence and typing a user gets: contacts (users who sent them a message or called them) or everyone."),
    ]

    /// Resolves the configuration from defaults, environment variables and flags.
    public init(_ values: ConfigValues) throws(ConfigError) {
        host = values.string("host")
        port = try values.int("port", in: 0...65535)
        portFile = values.optionalString("port-file")
        let cores = EventLoopGroup.coreCount
        let loops = try values.int("threads", in: 0...1024)
        threads = loops == 0 ? cores : loops
        let blocking = try values.int("blocking-threads", in: 0...1024)
        blockingThreads = blocking == 0 ? cores : blocking
        dataDirectory = values.string("data-dir")
        databaseURL = values.optionalString("database-url")
        migrationsDirectory = values.string("migrations-dir")
        guard let level = LogLevel(name: values.string("log-level")) else {
            throw .invalidValue(option: values.origin("log-level"), value: values.string("log-level"), expected: "a log level")
        }
        logLevel = level
        maxConnections = try values.int("max-connections", in: 1...10_000_000)
        maxHeaderBytes = try values.int("max-header-bytes", in: 1024...(1 << 20))
        maxHeaderCount = try values.int("max-header-count", in: 8...10_000)
        maxBodyBytes = try values.int("max-body-bytes", in: 0...(1 << 30))
        maxOutboundBytes = try values.int("max-outbound-bytes", in: 4096...(1 << 30))
        idleTimeout = try values.duration("idle-timeout")
        headerTimeout = try values.duration("header-timeout")
        bodyTimeout = try values.duration("body-timeout")
        slowReaderTimeout = try values.duration("slow-reader-timeout")
        shutdownTimeout = try values.duration("shutdown-timeout")
        databasePoolSize = try values.int("db-pool-size", in: 1...64)
        statementTimeout = try values.duration("db-statement-timeout")
        regexTimeout = try values.duration("regex-timeout")
        loginFailuresPerAccount = try values.int("login-failures-per-account", in: 0...1_000_000)
        loginFailuresPerAddress = try values.int("login-failures-per-address", in: 0...1_000_000)
        loginFailureWindow = try values.duration("login-failure-window")
        regexConcurrency = try values.int("regex-concurrency", in: 1...1024)
        maxAnswerBytes = try values.int("max-answer-size", in: 1024...(1 << 30))
        maxObjectBytes = try values.int("max-object-size", in: 1024...(1 << 30))
        appID = values.string("app-id")
        masterKey = values.optionalString("master-key")
        restAPIKey = values.optionalString("rest-api-key")
        mountPath = values.string("mount-path")
        publicURL = nil
        if let text = values.optionalString("public-url") {
            guard let url = ParseServerURL.normalized(publicURL: text) else {
                throw .invalidValue(option: values.origin("public-url"), value: text, expected: "an http:// or https:// URL without query or fragment")
            }
            publicURL = url
        }
        trustedProxies = []
        for entry in values.list("trusted-proxies") {
            guard let network = IPNetwork(entry) else {
                throw .invalidValue(option: values.origin("trusted-proxies"), value: entry, expected: "an IP address or CIDR (10.0.0.0/8, ::1)")
            }
            trustedProxies.append(network)
        }
        enableTestEndpoints = try values.bool("enable-test-endpoints")
        allowClientClassCreation = try values.bool("allow-client-class-creation")
        metricsToken = values.optionalString("metrics-token")
        realtime = RealtimeConfiguration()
        realtime.retention = try values.duration("realtime-retention")
        realtime.retentionInterval = try values.duration("realtime-retention-interval")
        realtime.helloTimeout = try values.duration("realtime-hello-timeout")
        realtime.pingInterval = try values.duration("realtime-ping-interval")
        realtime.sendRatePerSecond = Double(try values.int("realtime-send-rate", in: 1...1_000_000))
        realtime.sendBurst = Double(try values.int("realtime-send-burst", in: 1...1_000_000))
        realtime.maxDevicesPerUser = try values.int("realtime-max-devices", in: 1...1000)
        realtime.nodeStaleAfter = try values.duration("realtime-node-stale-after")
        guard let scope = PresenceScope(rawValue: values.string("realtime-presence-scope")) else {
            throw .invalidValue(option: values.origin("realtime-presence-scope"), value: values.string("realtime-presence-scope"),
                                expected: "contacts or everyone")
        }
        realtime.presenceScope = scope
        guard realtime.nodeStaleAfter > realtime.heartbeatInterval else {
            throw .invalidValue(option: values.origin("realtime-node-stale-after"), value: values.string("realtime-node-stale-after"),
                                expected: "a duration longer than the heartbeat interval (10s)")
        }
        tls = try Self.tlsSettings(values)
        files = try Self.fileSettings(values, dataDirectory: dataDirectory)
        tlsCAFile = values.optionalString("tls-ca-file")
        calls = try Self.callConfiguration(values)
        push = try Self.pushConfiguration(values)
        pushPagingConcurrency = try values.int("push-paging-concurrency", in: 1...256)
        appName = values.string("app-name")
        identity = try Self.identityConfiguration(values)
        push.tlsCAFile = tlsCAFile
        identity.tlsCAFile = tlsCAFile
        mail = try Self.mailConfiguration(values, appName: appName)
        cloud = try Self.cloudConfiguration(values)
        let lifetime = try values.duration("session-lifetime")
        let cacheTTL = try values.duration("session-cache-ttl")
        let lockout = try values.duration("lockout-duration")
        let verifyValidity = try values.duration("email-verify-token-validity")
        accounts = AccountsConfiguration(
            sessionLifetimeSeconds: max(1, lifetime.components.seconds),
            lockoutThreshold: try values.int("lockout-threshold", in: 0...1_000_000),
            lockoutMinutes: Int(max(1, lockout.components.seconds / 60)),
            passwordOperationsLimit: try values.int("password-ops-limit", in: 1...100),
            passwordMemoryLimit: try values.int("password-mem-limit", in: 8192...(4 << 30)),
            passwordHashQueue: try values.int("password-hash-queue", in: 1...100_000),
            sessionCacheTTLSeconds: cacheTTL.components.seconds,
            passwordPolicy: try Self.passwordPolicy(values),
            verifyUserEmails: try values.bool("verify-user-emails"),
            preventLoginWithUnverifiedEmail: try values.bool("prevent-login-with-unverified-email"),
            emailVerifyTokenValidity: verifyValidity > .zero ? verifyValidity : nil,
            accountMailsPerHour: try values.int("account-mails-per-hour", in: 1...1000))
        pages = try Self.accountPages(values, appName: appName)
        if accounts.verifyUserEmails && publicURL == nil {
            throw .invalidValue(option: values.origin("verify-user-emails"), value: "true", expected: "false unless --public-url is set (the links in the mails)")
        }
        guard mountPath.hasPrefix("/") else {
            throw .invalidValue(option: values.origin("mount-path"), value: mountPath, expected: "a path starting with /")
        }
    }

    /// `--help` text listing every option with its variable and default.
    public static func helpText(command: String, summary: String, options: [ConfigOption]) -> String {
        var text = "Usage: parley \(command) [options]\n\n\(summary)\n\nOptions:\n"
        for option in options {
            let env = option.environment.map { " (env \($0))" } ?? ""
            let def = option.defaultValue.isEmpty ? "none" : option.defaultValue
            text += "  \(option.flag)\(option.isSwitch ? "" : " VALUE")\(env)\n      \(option.help) Default: \(def).\n"
        }
        return text
    }
}

extension ServerConfig {
    /// The options as a Markdown table (docs/configuration.md is generated from this).
    public static func markdownReference(options: [ConfigOption]) -> String {
        var text = "| Flag | Environment | Default | Meaning |\n| --- | --- | --- | --- |\n"
        for option in options {
            let env = option.environment.map { "`\($0)`" } ?? ""
            let def = option.defaultValue.isEmpty ? "(none)" : "`\(option.defaultValue)`"
            text += "| `\(option.flag)` | \(env) | \(def) | \(option.help) |\n"
        }
        return text
    }
}

extension ServerConfig {
    /// Options of call signalling (call.* on /v1/socket, /v1/calls) and TURN (/v1/turn).
    static let callOptions: [ConfigOption] = [
        ConfigOption("call-reach-timeout", env: "PARLEY_CALL_REACH_TIMEOUT", default: "10s", "A call no callee device rings for within this ends with timeout."),
        ConfigOption("call-ring-timeout", env: "PARLEY_CALL_RING_TIMEOUT", default: "45s", "A ringing call not answered within this ends with noAnswer."),
        ConfigOption("call-grace-period", env: "PARLEY_CALL_GRACE_PERIOD", default: "20s", "A party whose connection is lost during a call and not back within this ends it with inactive."),
        ConfigOption("call-max-per-user", env: "PARLEY_CALL_MAX_PER_USER", default: "1", "Live calls a user may take part in at once; a call to a user at the limit ends with busy."),
        ConfigOption("call-node-sweep-interval", env: "PARLEY_CALL_NODE_SWEEP_INTERVAL", default: "60s",
                     "How often each node ends (failure/node_lost) the live calls of stopped nodes (at least 1s)."),
        ConfigOption("turn-uris", env: "PARLEY_TURN_URIS", default: "", "Comma-separated turn:/turns: URIs handed out by GET /v1/turn (empty = TURN off)."),
        ConfigOption("turn-secret", env: "PARLEY_TURN_SECRET", default: "", "The TURN server's static-auth-secret (coturn --use-auth-secret); empty = TURN off."),
        ConfigOption("turn-ttl", env: "PARLEY_TURN_TTL", default: "24h", "How long TURN credentials stay valid."),
    ]

    static func callConfiguration(_ values: ConfigValues) throws(ConfigError) -> CallConfiguration {
        let timeouts = CallTimeouts(reach: try values.duration("call-reach-timeout"), ring: try values.duration("call-ring-timeout"),
                                    grace: try values.duration("call-grace-period"))
        for (key, value) in [("call-reach-timeout", timeouts.reach), ("call-ring-timeout", timeouts.ring), ("call-grace-period", timeouts.grace)]
        where value < .milliseconds(10) {
            throw .invalidValue(option: values.origin(key), value: values.string(key), expected: "a duration of at least 10ms")
        }
        let ttl = try values.duration("turn-ttl")
        guard ttl >= .seconds(1) else {
            throw .invalidValue(option: values.origin("turn-ttl"), value: values.string("turn-ttl"), expected: "a duration of at least 1s")
        }
        let sweep = try values.duration("call-node-sweep-interval")
        guard sweep >= .seconds(1) else {
            throw .invalidValue(option: values.origin("call-node-sweep-interval"), value: values.string("call-node-sweep-interval"),
                                expected: "a duration of at least 1s")
        }
        return CallConfiguration(
            timeouts: timeouts, maxCallsPerUser: try values.int("call-max-per-user", in: 1...1000), nodeSweepInterval: sweep,
            turn: TURNConfiguration.ifEnabled(uris: values.list("turn-uris"), secret: values.optionalString("turn-secret"), ttl: ttl))
    }
}

extension ServerConfig {
    /// Options of push delivery (docs/push.md).
    static let pushOptions: [ConfigOption] = [
        ConfigOption("push-gateway-url", env: "PARLEY_PUSH_GATEWAY_URL", default: "", "gorush-compatible push gateway (http://host:port or https://, verified against --tls-ca-file or the system store; POST /api/push). Empty = none: push jobs are logged and marked skipped."),
        ConfigOption("push-bundle-id", env: "PARLEY_PUSH_BUNDLE_ID", default: "", "The iOS app's bundle id: APNs topic of alerts; VoIP pushes use <bundle id>.voip (empty = no topic sent)."),
        ConfigOption("push-title-field", env: "PARLEY_PUSH_TITLE_FIELD", default: "username", "_User field shown as the title of a message push (username when the user has no such field)."),
        ConfigOption("push-message-preview", env: "PARLEY_PUSH_MESSAGE_PREVIEW", default: "true", "Show the message text in pushes; false = \"New message\"."),
        ConfigOption("push-collapse-window", env: "PARLEY_PUSH_COLLAPSE_WINDOW", default: "1s", "A message push waits this long after the first message, so a burst in one conversation is one push."),
        ConfigOption("push-batch-size", env: "PARLEY_PUSH_BATCH_SIZE", default: "100", "Jobs per gateway request (gorush's core.max_notification, default 100, must allow it)."),
        ConfigOption("push-concurrency", env: "PARLEY_PUSH_CONCURRENCY", default: "4", "Gateway requests in flight per node."),
        ConfigOption("push-max-attempts", env: "PARLEY_PUSH_MAX_ATTEMPTS", default: "8", "Attempts before a push job is dead (parley push retry --dead sends it again)."),
        ConfigOption("push-backoff-base", env: "PARLEY_PUSH_BACKOFF_BASE", default: "2s", "Delay before the second attempt; doubles per attempt, with jitter."),
        ConfigOption("push-backoff-max", env: "PARLEY_PUSH_BACKOFF_MAX", default: "10m", "Longest delay between attempts."),
        ConfigOption("push-request-timeout", env: "PARLEY_PUSH_REQUEST_TIMEOUT", default: "10s", "Deadline of one gateway request; a node that stops mid-send loses its jobs to the others after twice this plus 5 s."),
        ConfigOption("push-poll-interval", env: "PARLEY_PUSH_POLL_INTERVAL", default: "1s", "How often a node looks for due push jobs when nothing woke it (retries, other nodes' jobs)."),
        ConfigOption("push-retention", env: "PARLEY_PUSH_RETENTION", default: "7d", "Finished push jobs are deleted after this (dead ones stay)."),
        ConfigOption("push-paging-concurrency", env: "PARLEY_PUSH_PAGING_CONCURRENCY", default: "4", "POST /push requests paged into push jobs at once per node; more wait, recorded (_PushStatus pending), for a free slot on any node."),
    ]

    static func pushConfiguration(_ values: ConfigValues) throws(ConfigError) -> PushConfiguration {
        var url: HTTPClientURL?
        if let text = values.optionalString("push-gateway-url") {
            guard let parsed = HTTPClientURL(text) else {
                throw .invalidValue(option: values.origin("push-gateway-url"), value: text, expected: "an http[s]://host[:port] URL")
            }
            url = parsed
        }
        let durations = ["push-collapse-window", "push-backoff-base", "push-backoff-max", "push-request-timeout", "push-poll-interval", "push-retention"]
        var parsed: [String: Duration] = [:]
        for key in durations {
            let value = try values.duration(key)
            guard key == "push-collapse-window" || value >= .milliseconds(10) else {
                throw .invalidValue(option: values.origin(key), value: values.string(key), expected: "a duration of at least 10ms")
            }
            parsed[key] = value
        }
        return PushConfiguration(
            gatewayURL: url, bundleID: values.string("push-bundle-id"), titleField: values.string("push-title-field"),
            messagePreview: try values.bool("push-message-preview"), collapseWindow: parsed["push-collapse-window"]!,
            batchSize: try values.int("push-batch-size", in: 1...1000), concurrency: try values.int("push-concurrency", in: 1...256),
            maxAttempts: try values.int("push-max-attempts", in: 1...1000), backoffBase: parsed["push-backoff-base"]!,
            backoffMax: parsed["push-backoff-max"]!, requestTimeout: parsed["push-request-timeout"]!,
            pollInterval: parsed["push-poll-interval"]!, retention: parsed["push-retention"]!)
    }
}

extension ServerConfig {
    /// Options of Cloud Code webhooks (docs/cloud-code.md).
    static let cloudOptions: [ConfigOption] = [
        ConfigOption("webhook-key", env: "PARLEY_WEBHOOK_KEY", default: "", "Sent as X-Parse-Webhook-Key with every webhook call, so the webhook service can tell Parley's calls apart (empty = none)."),
        ConfigOption("webhook-timeout", env: "PARLEY_WEBHOOK_TIMEOUT", default: "10s", "Deadline of a cloud function or trigger webhook call (then 141)."),
        ConfigOption("webhook-job-timeout", env: "PARLEY_WEBHOOK_JOB_TIMEOUT", default: "15m", "Deadline of a job webhook call (POST /jobs/:name)."),
        ConfigOption("webhook-max-answer-bytes", env: "PARLEY_WEBHOOK_MAX_ANSWER_BYTES", default: "1048576", "Largest webhook answer read; a larger one fails the call (141)."),
        ConfigOption("webhook-connections", env: "PARLEY_WEBHOOK_CONNECTIONS", default: "16", "Kept-alive connections per webhook host per event loop."),
        ConfigOption("webhook-queue", env: "PARLEY_WEBHOOK_QUEUE", default: "256", "Webhook calls waiting for a connection per host per event loop; more fail at once (141)."),
        ConfigOption("webhook-concurrency", env: "PARLEY_WEBHOOK_CONCURRENCY", default: "16", "After-trigger and job deliveries in flight per node."),
        ConfigOption("webhook-max-attempts", env: "PARLEY_WEBHOOK_MAX_ATTEMPTS", default: "8", "Attempts of an after-trigger or job delivery that gets no answer before it is dead."),
        ConfigOption("webhook-backoff-base", env: "PARLEY_WEBHOOK_BACKOFF_BASE", default: "1s", "Delay before a delivery's second attempt; doubles per attempt, with jitter."),
        ConfigOption("webhook-backoff-max", env: "PARLEY_WEBHOOK_BACKOFF_MAX", default: "5m", "Longest delay between delivery attempts."),
        ConfigOption("webhook-poll-interval", env: "PARLEY_WEBHOOK_POLL_INTERVAL", default: "1s", "How often a node looks for due deliveries when nothing woke it (retries, other nodes' work)."),
        ConfigOption("webhook-max-deliveries", env: "PARLEY_WEBHOOK_MAX_DELIVERIES", default: "100000", "After-trigger deliveries kept (pending and dead); beyond, the oldest are dropped (dead first), logged and counted."),
        ConfigOption("webhook-delivery-max-age", env: "PARLEY_WEBHOOK_DELIVERY_MAX_AGE", default: "24h", "An after-trigger or job delivery still failing when older than this is dead, whatever its attempts."),
        ConfigOption("webhook-traffic-timeout", env: "PARLEY_WEBHOOK_TRAFFIC_TIMEOUT", default: "3s", "Deadline of a beforeMessage or beforeCall webhook call (then the failure rule of --webhook-traffic-fail-open)."),
        ConfigOption("webhook-traffic-fail-open", env: "PARLEY_WEBHOOK_TRAFFIC_FAIL_OPEN", default: "false", "A beforeMessage or beforeCall webhook that cannot be called lets the message or call through (default: refused with hook_failed / failure).", isSwitch: true),
    ]

    static func cloudConfiguration(_ values: ConfigValues) throws(ConfigError) -> CloudConfiguration {
        var parsed: [String: Duration] = [:]
        for key in ["webhook-timeout", "webhook-job-timeout", "webhook-backoff-base", "webhook-backoff-max", "webhook-poll-interval",
                    "webhook-delivery-max-age", "webhook-traffic-timeout"] {
            let value = try values.duration(key)
            guard value >= .milliseconds(10) else {
                throw .invalidValue(option: values.origin(key), value: values.string(key), expected: "a duration of at least 10ms")
            }
            parsed[key] = value
        }
        return CloudConfiguration(
            webhookKey: values.optionalString("webhook-key"), timeout: parsed["webhook-timeout"]!, jobTimeout: parsed["webhook-job-timeout"]!,
            maxAnswerBytes: try values.int("webhook-max-answer-bytes", in: 1024...(64 << 20)),
            connectionsPerHost: try values.int("webhook-connections", in: 1...1024), queuePerHost: try values.int("webhook-queue", in: 0...100_000),
            concurrency: try values.int("webhook-concurrency", in: 1...1024), maxAttempts: try values.int("webhook-max-attempts", in: 1...1000),
            backoffBase: parsed["webhook-backoff-base"]!, backoffMax: parsed["webhook-backoff-max"]!, pollInterval: parsed["webhook-poll-interval"]!,
            maxDeliveries: try values.int("webhook-max-deliveries", in: 1...100_000_000), deliveryMaxAge: parsed["webhook-delivery-max-age"]!,
            trafficTimeout: parsed["webhook-traffic-timeout"]!, trafficFailOpen: try values.bool("webhook-traffic-fail-open"))
    }
}
