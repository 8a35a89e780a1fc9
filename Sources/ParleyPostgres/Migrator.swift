#if canImport(Glibc)
import Glibc
#endif
import ParleyLog

/// Where the migrations come from: a directory of `NNNN_name.sql` files, or their text compiled
/// into the binary (`ParleyMigrations.BundledMigrations`).
public enum MigrationSource: Sendable {
    case directory(String)
    /// (file name, SQL text) pairs, checked like the files of a directory.
    case files([(fileName: String, sql: String)])
}

/// Applies numbered SQL migrations to a database, once each, in version order.
///
/// - Each pending file runs in its own transaction together with its row in `schema_migrations`
///   (version, name, SHA-256 checksum of the text computed by the server, applied_at).
/// - A session advisory lock (`advisoryLockKey`) is held for the whole run, so two nodes starting
///   at once never migrate concurrently: the second waits, then finds nothing to do.
/// - An applied file whose text changed, or an applied version with no file, is refused before
///   anything is applied.
/// - Files must not contain transaction control (BEGIN/COMMIT) or statements that cannot run in a
///   transaction (CREATE INDEX CONCURRENTLY, ALTER TYPE … ADD VALUE before PostgreSQL 12).
///
/// Blocking: run at startup (`parley serve`, `parley migrate`) or on a blocking pool.
public struct Migrator: Sendable {
    /// Key of the session advisory lock taken while migrating ("parley" in ASCII).
    public static let advisoryLockKey = 0x7061_726C_6579
    /// Largest migration file accepted.
    public static let maxFileBytes = 4 << 20
    /// Most migration files accepted.
    public static let maxFiles = 10_000

    public let connectionString: String
    public let source: MigrationSource
    private let logger: Logger

    public init(connectionString: String, source: MigrationSource, logger: Logger = Logger(label: "postgres.migrations")) {
        self.connectionString = connectionString
        self.source = source
        self.logger = logger
    }

    /// The migrations of a directory.
    public init(connectionString: String, directory: String, logger: Logger = Logger(label: "postgres.migrations")) {
        self.init(connectionString: connectionString, source: .directory(directory), logger: logger)
    }

    /// Applies every pending migration and returns those applied by this call, in order.
    @discardableResult
    public func migrate() throws(MigrationError) -> [Migration] {
        let migrations: [Migration]
        switch source {
        case .directory(let directory): migrations = try Self.loadMigrations(from: directory)
        case .files(let files): migrations = try Self.migrations(files: files)
        }
        let connection: PostgresBlockingConnection
        do {
            connection = try PostgresBlockingConnection(connectionString: connectionString, statementTimeoutMilliseconds: 0)
        } catch {
            throw .database(error)
        }
        defer { connection.close() }
        do {
            try connection.query("SELECT pg_advisory_lock($1)", [.int(Self.advisoryLockKey)])
            try connection.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version bigint PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
        } catch {
            throw .database(error)
        }
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1)", [.int(Self.advisoryLockKey)]) }

        let applied: PostgresRows
        do {
            applied = try connection.query("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        } catch {
            throw .database(error)
        }
        var appliedVersions = Set<Int>()
        let byVersion = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for row in applied {
            guard let version = row["version"].int, let name = row["name"].string, let appliedChecksum = row["checksum"].string else { continue }
            appliedVersions.insert(version)
            guard let migration = byVersion[version] else { throw .appliedMigrationMissing(version: version, name: name) }
            let current = try checksum(of: migration.sql, on: connection)
            if current != appliedChecksum {
                throw .checksumMismatch(version: version, name: migration.name, applied: appliedChecksum, current: current)
            }
        }

        var done: [Migration] = []
        for migration in migrations where !appliedVersions.contains(migration.version) {
            logger.info("applying migration", [("version", String(migration.version)), ("name", migration.name)])
            do {
                try connection.execute("BEGIN")
                try connection.execute(migration.sql)
                try connection.query(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))",
                    [.int(migration.version), .text(migration.name), .text(migration.sql)])
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                if let name = Self.extensionNeedingSuperuser(error) {
                    let database = (try? connection.query("SELECT current_database() AS name"))?.first?["name"].string ?? "the database"
                    throw .extensionNeedsSuperuser(version: migration.version, name: migration.name, extension: name, database: database)
                }
                throw .failed(version: migration.version, name: migration.name, error: error)
            }
            done.append(migration)
        }
        if done.isEmpty {
            logger.debug("database schema is up to date", [("migrations", String(migrations.count))])
        } else {
            logger.notice("applied migrations", [("count", String(done.count)), ("latest", String(done.last!.version))])
        }
        return done
    }

    /// The extension named by "permission denied to create extension "X"" (SQLSTATE 42501): one
    /// that is not trusted, so only a superuser may create it (earthdistance on PostgreSQL 15).
    static func extensionNeedingSuperuser(_ error: PostgresError) -> String? {
        guard case .server(let server) = error, server.sqlState == "42501" else { return nil }
        let prefix = "permission denied to create extension \""
        guard server.message.hasPrefix(prefix), server.message.hasSuffix("\"") else { return nil }
        let name = server.message.dropFirst(prefix.count).dropLast()
        return name.isEmpty ? nil : String(name)
    }

    private func checksum(of sql: String, on connection: PostgresBlockingConnection) throws(MigrationError) -> String {
        do {
            let rows = try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex') AS checksum", [.text(sql)])
            return rows.first?["checksum"].string ?? ""
        } catch {
            throw .database(error)
        }
    }

    /// Reads `NNNN_name.sql` files (other names without `.sql`, and hidden files, are ignored),
    /// sorted by version.
    public static func loadMigrations(from directory: String) throws(MigrationError) -> [Migration] {
        guard LocalFiles.isDirectory(directory) else { throw .directoryNotFound(directory) }
        let names: [String]
        do {
            names = try LocalFiles.list(directory)
        } catch {
            throw .unreadable(error)
        }
        var files: [(fileName: String, sql: String)] = []
        for fileName in names.sorted() where fileName.hasSuffix(".sql") && !fileName.hasPrefix(".") {
            guard files.count < maxFiles else { throw .unreadable(FileSystemError(call: "opendir", path: directory, errno: E2BIG)) }
            let bytes: [UInt8]
            do {
                bytes = try LocalFiles.read(LocalFiles.join(directory, fileName), limit: maxFileBytes)
            } catch {
                throw .unreadable(error)
            }
            guard !bytes.contains(0), let sql = String(validating: bytes, as: UTF8.self) else { throw .invalidText(fileName) }
            files.append((fileName, sql))
        }
        return try migrations(files: files)
    }

    /// Checks (file name, SQL text) pairs as a directory's files are checked (names
    /// `NNNN_name.sql`, versions unique) and sorts them by version.
    public static func migrations(files: [(fileName: String, sql: String)]) throws(MigrationError) -> [Migration] {
        var migrations: [Migration] = []
        for (fileName, sql) in files {
            guard let (version, name) = Migration.parseFileName(fileName) else { throw .invalidFileName(fileName) }
            guard !sql.utf8.contains(0) else { throw .invalidText(fileName) }
            migrations.append(Migration(version: version, name: name, fileName: fileName, sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        var index = 0
        while index < migrations.count {
            var end = index + 1
            while end < migrations.count, migrations[end].version == migrations[index].version { end += 1 }
            if end - index > 1 { throw .duplicateVersion(migrations[index].version, migrations[index..<end].map(\.fileName)) }
            index = end
        }
        return migrations
    }

    /// The package's migrations directory for tests and tools run from a build tree: the first
    /// `migrations` (or `share/parley/migrations`) directory found walking up from the executable's
    /// directory (a build under `<package>/.build/…` finds `<package>/migrations`), else
    /// `./migrations`, else nil. The server itself uses the migrations compiled into it.
    public static func defaultDirectory() -> String? {
        if let executable = LocalFiles.readLink("/proc/self/exe") {
            var directory = Substring(executable)
            for _ in 0..<8 {
                guard let slash = directory.lastIndex(of: "/") else { break }
                directory = directory[..<slash]
                let base = directory.isEmpty ? "" : String(directory)
                for candidate in [base + "/migrations", base + "/share/parley/migrations"] where LocalFiles.isDirectory(candidate) {
                    return candidate
                }
                if directory.isEmpty { break }
            }
        }
        let local = LocalFiles.absolute("migrations")
        return LocalFiles.isDirectory(local) ? local : nil
    }
}
