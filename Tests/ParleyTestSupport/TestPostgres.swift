import Foundation
import ParleyPostgres
import Synchronization

/// One temporary PostgreSQL cluster per test process, on 127.0.0.1 and a free port, in a
/// temporary directory. Started on first use, stopped (and its directory removed) at exit.
public final class TestPostgres: Sendable {
    /// The running cluster.
    public let cluster: EmbeddedPostgres
    /// The temporary directory holding the cluster.
    public let directory: String
    /// The TCP port the server listens on.
    public let port: Int
    private let databaseCounter = Atomic<Int>(0)

    private static let instance: Result<TestPostgres, EmbeddedPostgresError> = start()

    /// The shared cluster, started on first call (throws the start error on every call if it failed).
    public static func shared() throws(EmbeddedPostgresError) -> TestPostgres {
        try instance.get()
    }

    private init(cluster: EmbeddedPostgres, directory: String, port: Int) {
        self.cluster = cluster
        self.directory = directory
        self.port = port
    }

    private static func start() -> Result<TestPostgres, EmbeddedPostgresError> {
        stopClustersOfDeadProcesses()
        let started = launch()
        atexit {
            if case .success(let postgres) = TestPostgres.instance { postgres.remove() }
        }
        return started
    }

    /// A cluster of the caller's own (not the shared one), for tests that stop and start the
    /// server. Call `remove()` when done; clusters left at exit are removed then.
    public static func makePrivate() throws(EmbeddedPostgresError) -> TestPostgres {
        let postgres = try launch().get()
        privateClusters.withLock { $0.append(postgres) }
        _ = privateClustersCleanup
        return postgres
    }

    private static let privateClusters = Mutex<[TestPostgres]>([])
    private static let privateClustersCleanup: Void = {
        atexit { TestPostgres.privateClusters.withLock { clusters in for postgres in clusters { postgres.remove() } } }
    }()

    /// Stops the server at once (as in a crash) and deletes its directory.
    public func remove() {
        if cluster.isStarted { try? cluster.stop(mode: .immediate) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func launch() -> Result<TestPostgres, EmbeddedPostgresError> {
        var template = Array("/tmp/parley-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            return .failure(.fileSystem(FileSystemError(call: "mkdtemp", path: "/tmp/parley-test-XXXXXX", errno: errno)))
        }
        let directory = String(cString: made)
        chmod(directory, 0o755)
        try? "\(getpid())\n".write(toFile: directory + "/" + ownerFile, atomically: true, encoding: .utf8)
        // PostgreSQL cannot bind port 0 and report it: a free port is picked, and when another
        // process binds it first (the start fails with "could not bind"), the next one is tried.
        var attempt = 0
        while true {
            attempt += 1
            let port = FreePort.next()
            let cluster = EmbeddedPostgres(configuration: .init(
                dataDirectory: directory,
                databaseName: "postgres",
                listen: .tcp(host: "127.0.0.1", port: port),
                durable: false,
                timeoutSeconds: 60,
                settings: ["max_connections": "200"]
            ))
            do {
                try cluster.start()
                return .success(TestPostgres(cluster: cluster, directory: directory, port: port))
            } catch {
                if case .commandFailed(_, _, let output) = error, output.contains("could not bind"), attempt < 8 { continue }
                try? FileManager.default.removeItem(atPath: directory)
                return .failure(error)
            }
        }
    }

    /// Names the test process that owns a cluster directory.
    private static let ownerFile = "owner.pid"

    /// Stops and removes the clusters of earlier test processes that died without their exit
    /// handler (a crash, SIGKILL): otherwise each leaves a running PostgreSQL behind.
    private static func stopClustersOfDeadProcesses() {
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: "/tmp") else { return }
        for name in names where name.hasPrefix("parley-test-") {
            let directory = "/tmp/" + name
            guard let text = try? String(contentsOfFile: directory + "/" + ownerFile, encoding: .utf8),
                  let owner = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                  kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            // An immediate shutdown (SIGQUIT to the postmaster): the data is throwaway.
            let pgData = EmbeddedPostgres(configuration: .init(dataDirectory: directory, databaseName: "postgres",
                                                               listen: .tcp(host: "127.0.0.1", port: 1))).pgData
            if let pidFile = try? String(contentsOfFile: pgData + "/postmaster.pid", encoding: .utf8),
               let line = pidFile.split(separator: "\n").first, let postmaster = Int32(line), postmaster > 0,
               kill(postmaster, SIGQUIT) == 0 {
                for _ in 0..<100 where kill(postmaster, 0) == 0 { usleep(20_000) }
            }
            try? files.removeItem(atPath: directory)
        }
    }

    /// A connection string for `database` on the test cluster.
    public func connectionString(database: String = "postgres") -> String {
        "host=127.0.0.1 port=\(port) user=postgres dbname=\(database)"
    }

    /// Creates a fresh, empty database and returns its connection string.
    public func makeDatabase(prefix: String = "test") throws(EmbeddedPostgresError) -> String {
        let number = databaseCounter.add(1, ordering: .relaxed).newValue
        let name = "\(prefix)_\(getpid())_\(number)"
        try cluster.createDatabase(name)
        return connectionString(database: name)
    }

    /// Restarts the server (`pg_ctl restart -m fast`), cutting every session.
    public func restart() throws(EmbeddedPostgresError) {
        try cluster.restart()
    }
}
