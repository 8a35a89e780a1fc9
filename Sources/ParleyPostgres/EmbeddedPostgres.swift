#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import Synchronization

/// A PostgreSQL cluster that Parley initialises, starts and stops itself (used when no
/// DATABASE_URL is given, and by tests).
///
/// Layout under the data directory (`--data-dir`, default `./.parley`):
/// `postgres/data` (PGDATA), `postgres/run` (unix socket), `postgres/postgres.log`,
/// `postgres/initdb.log`. When `postgres/run/.s.PGSQL.<port>` would exceed the 107-byte unix
/// socket path limit, the socket goes to a fresh `/tmp/parley-XXXXXX` directory instead.
///
/// Blocking: call at startup or from a blocking pool. Started as root, every PostgreSQL program
/// runs as `systemUser` through `runuser` (initdb refuses root) and the cluster directory is
/// chowned to it.
public final class EmbeddedPostgres: Sendable {
    /// How the server listens.
    public enum Listen: Sendable, Equatable {
        /// Only the private unix socket (no TCP); local connections are trusted.
        case unixSocket
        /// Also TCP on `host:port`, trusted without password: for tests only.
        case tcp(host: String, port: Int)
    }

    /// Settings of the embedded cluster.
    public struct Configuration: Sendable {
        /// Parley's data directory; the cluster lives in `<dataDirectory>/postgres`.
        public var dataDirectory: String
        /// Directory holding `initdb` and `pg_ctl`; nil searches PATH, then `/usr/lib/postgresql/*/bin` (newest first).
        public var binDirectory: String?
        /// Database created on first start and named in the returned connection string.
        public var databaseName: String
        public var listen: Listen
        /// Port number in the unix socket name when not listening on TCP.
        public var socketPort: Int
        /// Account the server runs as when Parley runs as root.
        public var systemUser: String
        /// false turns off fsync and synchronous commit (tests: faster, not crash safe).
        public var durable: Bool
        /// Seconds pg_ctl waits for start and stop.
        public var timeoutSeconds: Int
        /// Extra `postgresql.conf` settings, written to `parley.conf` at each start.
        public var settings: [String: String]

        public init(
            dataDirectory: String = ".parley",
            binDirectory: String? = nil,
            databaseName: String = "parley",
            listen: Listen = .unixSocket,
            socketPort: Int = 5432,
            systemUser: String = "postgres",
            durable: Bool = true,
            timeoutSeconds: Int = 60,
            settings: [String: String] = [:]
        ) {
            self.dataDirectory = dataDirectory
            self.binDirectory = binDirectory
            self.databaseName = databaseName
            self.listen = listen
            self.socketPort = socketPort
            self.systemUser = systemUser
            self.durable = durable
            self.timeoutSeconds = timeoutSeconds
            self.settings = settings
        }
    }

    /// Paths of the PostgreSQL programs in use.
    public struct Binaries: Sendable, Equatable {
        public var initdb: String
        public var pgCtl: String
    }

    private struct Running {
        var binaries: Binaries
        var socketDirectory: String
        var temporarySocketDirectory: Bool
        var port: Int
        var adopted: Bool
    }

    private struct Account {
        var name: String
        var uid: uid_t
        var gid: gid_t
        var runuser: String
    }

    public let configuration: Configuration
    private let state = Mutex<Running?>(nil)
    private let logger = Logger(label: "postgres.embedded")

    /// The cluster directory: `<dataDirectory>/postgres`.
    public let clusterDirectory: String
    /// PGDATA: `<dataDirectory>/postgres/data`.
    public let pgData: String
    /// The server log file.
    public let logFile: String

    public init(configuration: Configuration) {
        self.configuration = configuration
        clusterDirectory = LocalFiles.join(LocalFiles.absolute(configuration.dataDirectory), "postgres")
        pgData = LocalFiles.join(clusterDirectory, "data")
        logFile = LocalFiles.join(clusterDirectory, "postgres.log")
    }

    // MARK: Public operations

    /// Initialises the cluster if needed, starts it (or adopts a server already running on it),
    /// creates the database if missing, and returns a libpq connection string for it.
    @discardableResult
    public func start() throws(EmbeddedPostgresError) -> String {
        guard Self.isSafePath(clusterDirectory) else { throw .unsafePath(clusterDirectory) }
        let binaries = try Self.locateBinaries(in: configuration.binDirectory)
        let account = try Self.unprivilegedAccount(named: configuration.systemUser)
        try prepareClusterDirectory(account: account)

        if !LocalFiles.exists(LocalFiles.join(pgData, "PG_VERSION")) {
            try initialise(binaries: binaries, account: account)
        }

        if let adopted = runningServer() {
            logger.notice("adopting PostgreSQL already running on the cluster directory", [("pid", String(adopted.pid)), ("pgdata", pgData)])
            state.withLock {
                $0 = Running(binaries: binaries, socketDirectory: adopted.socketDirectory, temporarySocketDirectory: adopted.socketDirectory.hasPrefix("/tmp/parley-"), port: adopted.port, adopted: true)
            }
        } else {
            try removeStaleLockFiles()
            let port: Int
            if case .tcp(_, let tcpPort) = configuration.listen { port = tcpPort } else { port = configuration.socketPort }
            let (socketDirectory, temporary) = try chooseSocketDirectory(port: port, account: account)
            try writeSettings(socketDirectory: socketDirectory, port: port, account: account)
            logger.info("starting embedded PostgreSQL", [("pgdata", pgData), ("socket_dir", socketDirectory)])
            try runChecked(binaries.pgCtl, ["start", "-w", "-s", "-t", String(configuration.timeoutSeconds), "-D", pgData, "-l", logFile],
                           account: account, outputPath: LocalFiles.join(clusterDirectory, "pg_ctl.log"), logTail: logFile)
            state.withLock {
                $0 = Running(binaries: binaries, socketDirectory: socketDirectory, temporarySocketDirectory: temporary, port: port, adopted: false)
            }
        }
        try createDatabase(configuration.databaseName)
        return try connectionString()
    }

    /// How `stop` shuts the server down (`pg_ctl stop -m`).
    public enum ShutdownMode: String, Sendable {
        /// Active sessions are disconnected, then the server stops cleanly.
        case fast
        /// Every server process quits at once, as in a crash (recovery runs at the next start).
        case immediate
    }

    /// Stops the server (by default `pg_ctl stop -m fast`: active sessions are disconnected) and
    /// removes a temporary socket directory.
    public func stop(mode: ShutdownMode = .fast) throws(EmbeddedPostgresError) {
        guard let running = state.withLock({ $0 }) else { throw .notStarted }
        let account = try Self.unprivilegedAccount(named: configuration.systemUser)
        if LocalFiles.exists(LocalFiles.join(pgData, "postmaster.pid")) {
            logger.info("stopping embedded PostgreSQL", [("pgdata", pgData)])
            try runChecked(running.binaries.pgCtl, ["stop", "-w", "-s", "-m", mode.rawValue, "-t", String(configuration.timeoutSeconds), "-D", pgData],
                           account: account, outputPath: LocalFiles.join(clusterDirectory, "pg_ctl.log"), logTail: logFile)
        }
        if running.temporarySocketDirectory { rmdir(running.socketDirectory) }
        state.withLock { $0 = nil }
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every open session is cut.
    public func restart() throws(EmbeddedPostgresError) {
        guard let running = state.withLock({ $0 }) else { throw .notStarted }
        let account = try Self.unprivilegedAccount(named: configuration.systemUser)
        try runChecked(running.binaries.pgCtl, ["restart", "-w", "-s", "-m", "fast", "-t", String(configuration.timeoutSeconds), "-D", pgData, "-l", logFile],
                       account: account, outputPath: LocalFiles.join(clusterDirectory, "pg_ctl.log"), logTail: logFile)
    }

    /// Whether `start()` found the server already running (another process started it).
    public var adoptedRunningServer: Bool { state.withLock { $0?.adopted ?? false } }

    /// Whether this instance started (or adopted) the server and has not stopped it.
    public var isStarted: Bool { state.withLock { $0 != nil } }

    /// A libpq connection string for `database` (default: the configured one), as superuser `postgres`.
    public func connectionString(database: String? = nil) throws(EmbeddedPostgresError) -> String {
        guard let running = state.withLock({ $0 }) else { throw .notStarted }
        let host: String
        if case .tcp(let tcpHost, _) = configuration.listen { host = tcpHost } else { host = running.socketDirectory }
        return "host=\(Self.quoteConnectionValue(host)) port=\(running.port) user=postgres dbname=\(Self.quoteConnectionValue(database ?? configuration.databaseName))"
    }

    /// Creates a database unless it exists.
    public func createDatabase(_ name: String) throws(EmbeddedPostgresError) {
        do {
            let connection = try PostgresBlockingConnection(connectionString: try connectionString(database: "postgres"))
            defer { connection.close() }
            let existing = try connection.query("SELECT 1 FROM pg_database WHERE datname = $1", [.text(name)])
            if existing.isEmpty {
                try connection.execute("CREATE DATABASE \(Self.quoteIdentifier(name))")
            }
        } catch let error as PostgresError {
            if error.sqlState == "42P04" { return }
            throw .database(error)
        } catch let error as EmbeddedPostgresError {
            throw error
        } catch {
            throw .database(.unsupported("\(error)"))
        }
    }

    // MARK: Binaries and accounts

    /// Finds `initdb` and `pg_ctl`: in `directory` when given, else the first PATH entry holding
    /// both, else the newest `/usr/lib/postgresql/<version>/bin`.
    public static func locateBinaries(in directory: String? = nil) throws(EmbeddedPostgresError) -> Binaries {
        var candidates: [String] = []
        if let directory {
            candidates = [directory]
        } else {
            if let path = getenv("PATH") {
                candidates += String(cString: path).split(separator: ":").map(String.init)
            }
            let root = "/usr/lib/postgresql"
            let versions = ((try? LocalFiles.list(root)) ?? []).compactMap { name -> (Double, String)? in
                guard let number = Double(name) else { return nil }
                return (number, LocalFiles.join(LocalFiles.join(root, name), "bin"))
            }
            candidates += versions.sorted { $0.0 > $1.0 }.map(\.1)
            candidates += ["/usr/local/pgsql/bin"]
        }
        for dir in candidates {
            let initdb = LocalFiles.join(dir, "initdb"), pgCtl = LocalFiles.join(dir, "pg_ctl")
            if LocalFiles.isExecutableFile(initdb) && LocalFiles.isExecutableFile(pgCtl) {
                return Binaries(initdb: initdb, pgCtl: pgCtl)
            }
        }
        throw .binariesNotFound(searched: directory.map { [$0] } ?? ["/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin"])
    }

    /// The account to run as when this process is root, nil otherwise.
    private static func unprivilegedAccount(named name: String) throws(EmbeddedPostgresError) -> Account? {
        guard geteuid() == 0 else { return nil }
        guard let entry = getpwnam(name) else {
            throw .cannotDropPrivileges("running as root and user \(name) does not exist (create it or run Parley as a normal user)")
        }
        let runuser = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"].first(where: LocalFiles.isExecutableFile)
        guard let runuser else { throw .cannotDropPrivileges("running as root and runuser (util-linux) is not installed") }
        return Account(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid, runuser: runuser)
    }

    // MARK: Steps

    private func prepareClusterDirectory(account: Account?) throws(EmbeddedPostgresError) {
        do throws(FileSystemError) {
            try LocalFiles.makeDirectories(LocalFiles.absolute(configuration.dataDirectory), mode: 0o755)
            let existed = LocalFiles.isDirectory(clusterDirectory)
            try LocalFiles.makeDirectories(clusterDirectory, mode: 0o700)
            if let account {
                if existed {
                    try LocalFiles.changeOwnerRecursively(clusterDirectory, uid: account.uid, gid: account.gid)
                } else {
                    guard chown(clusterDirectory, account.uid, account.gid) == 0 else {
                        throw FileSystemError(call: "chown", path: clusterDirectory, errno: errno)
                    }
                }
            }
        } catch {
            throw .fileSystem(error)
        }
        if let account, LocalFiles.isExecutableFile("/usr/bin/test") {
            let status = try run("/usr/bin/test", ["-w", clusterDirectory, "-a", "-x", clusterDirectory], account: account, outputPath: nil)
            if !status.isSuccess { throw .directoryNotAccessible(path: clusterDirectory, user: account.name) }
        }
    }

    private func initialise(binaries: Binaries, account: Account?) throws(EmbeddedPostgresError) {
        if LocalFiles.isDirectory(pgData), let entries = try? LocalFiles.list(pgData), !entries.isEmpty {
            throw .notAClusterDirectory(pgData)
        }
        var arguments = ["-D", pgData, "-U", "postgres", "--encoding=UTF8", "--locale=\(Self.utf8Locale)", "--lc-collate=C",
                         "--auth-local=trust", "--no-instructions"]
        if case .tcp = configuration.listen { arguments.append("--auth-host=trust") } else { arguments.append("--auth-host=reject") }
        if !configuration.durable { arguments.append("--no-sync") }
        let output = LocalFiles.join(clusterDirectory, "initdb.log")
        LocalFiles.remove(output)
        logger.notice("initialising embedded PostgreSQL cluster", [("pgdata", pgData)])
        try runChecked(binaries.initdb, arguments, account: account, outputPath: output, logTail: output)
        do throws(FileSystemError) {
            let conf = LocalFiles.join(pgData, "postgresql.conf")
            let original = String(decoding: try LocalFiles.read(conf, limit: 1 << 20), as: UTF8.self)
            try LocalFiles.write(conf, original + "\n# Settings managed by parley (rewritten at each start).\ninclude_if_exists = 'parley.conf'\n", mode: 0o600)
            if let account { _ = chown(conf, account.uid, account.gid) }
        } catch {
            throw .fileSystem(error)
        }
    }

    /// `C.UTF-8` when the C library has it (Unicode-aware upper/lower), else `C`.
    private static var utf8Locale: String {
        guard let locale = newlocale(Int32(1) << LC_CTYPE, "C.UTF-8", nil) else { return "C" }
        freelocale(locale)
        return "C.UTF-8"
    }

    private func chooseSocketDirectory(port: Int, account: Account?) throws(EmbeddedPostgresError) -> (String, Bool) {
        let preferred = LocalFiles.join(clusterDirectory, "run")
        let socketName = "/.s.PGSQL.\(port)"
        do throws(FileSystemError) {
            if (preferred + socketName).utf8.count <= 107 {
                try LocalFiles.makeDirectories(preferred, mode: 0o700)
                if let account, chown(preferred, account.uid, account.gid) != 0 {
                    throw FileSystemError(call: "chown", path: preferred, errno: errno)
                }
                return (preferred, false)
            }
            var template = Array("/tmp/parley-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw FileSystemError(call: "mkdtemp", path: "/tmp/parley-XXXXXX", errno: errno)
            }
            let path = String(cString: made)
            if let account, chown(path, account.uid, account.gid) != 0 {
                throw FileSystemError(call: "chown", path: path, errno: errno)
            }
            logger.notice("cluster path too long for a unix socket; using a temporary socket directory", [("socket_dir", path)])
            return (path, true)
        } catch {
            throw .fileSystem(error)
        }
    }

    private func writeSettings(socketDirectory: String, port: Int, account: Account?) throws(EmbeddedPostgresError) {
        var lines = ["# Written by parley at each start of the embedded cluster; put your own settings in postgresql.conf."]
        func set(_ key: String, _ value: String) {
            lines.append("\(key) = '\(value.doubling("'"))'")
        }
        switch configuration.listen {
        case .unixSocket: set("listen_addresses", "")
        case .tcp(let host, _): set("listen_addresses", host)
        }
        set("port", String(port))
        set("unix_socket_directories", socketDirectory)
        set("unix_socket_permissions", "0700")
        if !configuration.durable {
            set("fsync", "off")
            set("synchronous_commit", "off")
            set("full_page_writes", "off")
        }
        for (key, value) in configuration.settings.sorted(by: { $0.key < $1.key }) { set(key, value) }
        let path = LocalFiles.join(pgData, "parley.conf")
        do throws(FileSystemError) {
            try LocalFiles.write(path, lines.joined(separator: "\n") + "\n", mode: 0o600)
            if let account, chown(path, account.uid, account.gid) != 0 {
                throw FileSystemError(call: "chown", path: path, errno: errno)
            }
        } catch {
            throw .fileSystem(error)
        }
    }

    /// A postmaster that is alive and serving this data directory (from `postmaster.pid`).
    private func runningServer() -> (pid: Int32, port: Int, socketDirectory: String)? {
        guard let bytes = try? LocalFiles.read(LocalFiles.join(pgData, "postmaster.pid"), limit: 64 * 1024) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 5, let pid = Int32(lines[0].trimmingSpaces), pid > 0, let port = Int(lines[3].trimmingSpaces) else { return nil }
        guard Self.isPostgresServing(pid: pid, pgData: pgData) else { return nil }
        return (pid, port, lines[4].trimmingSpaces)
    }

    /// True when `pid` is a live postgres process whose working directory is `pgData`
    /// (the postmaster chdirs there); an unreadable cwd counts as a match.
    static func isPostgresServing(pid: Int32, pgData: String) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let comm = try? LocalFiles.read("/proc/\(pid)/comm", limit: 256) else { return true }
        let name = String(decoding: comm, as: UTF8.self).trimmingSpaces
        guard name == "postgres" || name == "postmaster" else { return false }
        guard let cwd = LocalFiles.readLink("/proc/\(pid)/cwd") else { return true }
        return cwd == (LocalFiles.realPath(pgData) ?? pgData)
    }

    /// Removes a `postmaster.pid` left by a server that is gone (crash, reboot, or pid reused by
    /// another program), which would otherwise make the new server refuse to start.
    private func removeStaleLockFiles() throws(EmbeddedPostgresError) {
        let pidFile = LocalFiles.join(pgData, "postmaster.pid")
        guard LocalFiles.exists(pidFile) else { return }
        logger.warning("removing stale postmaster.pid (its server is not running)", [("path", pidFile)])
        if unlink(pidFile) != 0 { throw .fileSystem(FileSystemError(call: "unlink", path: pidFile, errno: errno)) }
        let socketDirectory = LocalFiles.join(clusterDirectory, "run")
        for name in (try? LocalFiles.list(socketDirectory)) ?? [] where name.hasPrefix(".s.PGSQL.") {
            LocalFiles.remove(LocalFiles.join(socketDirectory, name))
        }
    }

    // MARK: Processes

    private static let childEnvironment = ["PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"]

    /// Runs a PostgreSQL program in the cluster directory (the server's user may have no access to
    /// our working directory).
    private func run(_ program: String, _ arguments: [String], account: Account?, outputPath: String?) throws(EmbeddedPostgresError) -> ExitStatus {
        do {
            if let account {
                return try ChildProcess.run(account.runuser, arguments: ["-u", account.name, "--", program] + arguments,
                                            environment: Self.childEnvironment, outputPath: outputPath, workingDirectory: clusterDirectory)
            }
            return try ChildProcess.run(program, arguments: arguments, environment: Self.childEnvironment, outputPath: outputPath,
                                        workingDirectory: clusterDirectory)
        } catch {
            throw .process(error)
        }
    }

    private func runChecked(_ program: String, _ arguments: [String], account: Account?, outputPath: String, logTail: String) throws(EmbeddedPostgresError) {
        // The output file is opened before runuser drops privileges, so the child needs no rights on it.
        let status = try run(program, arguments, account: account, outputPath: outputPath)
        guard status.isSuccess else {
            var output = LocalFiles.tail(outputPath, count: 2000)
            if logTail != outputPath { output += LocalFiles.tail(logTail, count: 3000) }
            let name = program.split(separator: "/").last.map(String.init) ?? program
            throw .commandFailed(command: "\(name) \(arguments.first ?? "")", status: status, output: output)
        }
    }

    // MARK: Quoting

    static func isSafePath(_ path: String) -> Bool {
        !path.contains(where: { "\"'$`\\\n\r".contains($0) })
    }

    /// Quotes a value for a `key=value` libpq connection string.
    public static func quoteConnectionValue(_ value: String) -> String {
        var out = "'"
        for ch in value {
            if ch == "'" || ch == "\\" { out.append("\\") }
            out.append(ch)
        }
        return out + "'"
    }

    /// Quotes an SQL identifier (`"name"`, inner quotes doubled).
    public static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.doubling("\"") + "\""
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let first = s.first, first == " " || first == "\n" || first == "\t" || first == "\r" { s = s.dropFirst() }
        while let last = s.last, last == " " || last == "\n" || last == "\t" || last == "\r" { s = s.dropLast() }
        return String(s)
    }

    /// The string with every `character` written twice (SQL quoting).
    func doubling(_ character: Character) -> String {
        var out = ""
        for ch in self {
            out.append(ch)
            if ch == character { out.append(ch) }
        }
        return out
    }
}
