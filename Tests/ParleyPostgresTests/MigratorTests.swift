import Foundation
import ParleyPostgres
import ParleyTestSupport
import Synchronization
import XCTest

final class MigratorTests: XCTestCase {
    private var directories: [String] = []

    override func tearDown() {
        for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        super.tearDown()
    }

    private func makeDirectory(_ files: [String: String]) throws -> String {
        let directory = NSTemporaryDirectory() + "parley-migrations-\(getpid())-\(Int.random(in: 0..<1_000_000_000))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        directories.append(directory)
        return directory
    }

    func testAppliesInOrderOnceAndRecordsChecksums() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "migrate")
        let directory = try makeDirectory([
            "0002_add_column.sql": "ALTER TABLE notes ADD COLUMN body text;\nINSERT INTO notes (id, body) VALUES (1, 'x');",
            "0001_create.sql": "CREATE TABLE notes (id bigint PRIMARY KEY);",
            "README.md": "not a migration",
        ])
        let applied = try Migrator(connectionString: url, directory: directory).migrate()
        XCTAssertEqual(applied.map(\.version), [1, 2])
        XCTAssertEqual(try Migrator(connectionString: url, directory: directory).migrate(), [])

        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }
        let rows = try connection.query("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        XCTAssertEqual(rows.map { $0["name"].string }, ["create", "add_column"])
        XCTAssertEqual(rows.first?["checksum"].string?.count, 64)
        XCTAssertEqual(try connection.query("SELECT body FROM notes").first?["body"].string, "x")
    }

    func testChangedAppliedMigrationIsRefused() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "checksum")
        let directory = try makeDirectory(["0001_create.sql": "CREATE TABLE a (id int);"])
        try Migrator(connectionString: url, directory: directory).migrate()

        try "CREATE TABLE a (id bigint);".write(toFile: directory + "/0001_create.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE b (id int);".write(toFile: directory + "/0002_more.sql", atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try Migrator(connectionString: url, directory: directory).migrate()) { error in
            guard case MigrationError.checksumMismatch(let version, let name, let appliedSum, let currentSum) = error else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(version, 1)
            XCTAssertEqual(name, "create")
            XCTAssertNotEqual(appliedSum, currentSum)
            XCTAssertTrue("\(error)".contains("changed after it was applied"))
        }
        // Nothing after the refused file was applied.
        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }
        XCTAssertEqual(try connection.query("SELECT to_regclass('b') IS NULL AS missing").first?["missing"].bool, true)
    }

    func testMissingFileForAppliedVersionIsRefused() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "missing")
        let directory = try makeDirectory(["0001_create.sql": "CREATE TABLE a (id int);"])
        try Migrator(connectionString: url, directory: directory).migrate()
        try FileManager.default.removeItem(atPath: directory + "/0001_create.sql")
        XCTAssertThrowsError(try Migrator(connectionString: url, directory: directory).migrate()) { error in
            XCTAssertEqual(error as? MigrationError, .appliedMigrationMissing(version: 1, name: "create"))
        }
    }

    func testFailingMigrationRollsBackOnlyItself() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "failing")
        let directory = try makeDirectory([
            "0001_ok.sql": "CREATE TABLE ok (id int);",
            "0002_bad.sql": "CREATE TABLE half (id int);\nSELECT * FROM no_such_table;",
        ])
        XCTAssertThrowsError(try Migrator(connectionString: url, directory: directory).migrate()) { error in
            guard case MigrationError.failed(2, "bad", let cause) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(cause.sqlState, "42P01")
        }
        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }
        XCTAssertEqual(try connection.query("SELECT to_regclass('ok') IS NOT NULL AS present, to_regclass('half') IS NULL AS absent").first.map {
            [$0["present"].bool, $0["absent"].bool]
        }, [true, true])
        XCTAssertEqual(try connection.query("SELECT count(*) AS n FROM schema_migrations").first?["n"].int, 1)
    }

    func testConcurrentMigratorsApplyOnceUnderTheAdvisoryLock() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "lock")
        // The first file is slow, so the second migrator certainly arrives while the first holds the lock.
        let directory = try makeDirectory([
            "0001_slow.sql": "SELECT pg_sleep(0.5); CREATE TABLE once (id int);",
            "0002_insert.sql": "INSERT INTO once VALUES (1);",
        ])
        let results = Mutex<[Result<Int, MigrationError>]>([])
        let group = DispatchGroup()
        for _ in 0..<2 {
            group.enter()
            Thread.detachNewThread {
                let outcome = Result { () throws(MigrationError) -> Int in try Migrator(connectionString: url, directory: directory).migrate().count }
                results.withLock { $0.append(outcome) }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        let outcomes = results.withLock { $0 }
        let counts = outcomes.compactMap { try? $0.get() }.sorted()
        XCTAssertEqual(counts, [0, 2], "\(outcomes)")
        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }
        XCTAssertEqual(try connection.query("SELECT count(*) AS n FROM once").first?["n"].int, 1)
    }

    func testFileNameRules() throws {
        XCTAssertEqual(Migration.parseFileName("0007_add_users.sql")?.version, 7)
        XCTAssertEqual(Migration.parseFileName("0007_add_users.sql")?.name, "add_users")
        XCTAssertNil(Migration.parseFileName("init.sql"))
        XCTAssertNil(Migration.parseFileName("0007.sql"))
        XCTAssertNil(Migration.parseFileName("x7_a.sql"))
        let bad = try makeDirectory(["0001_a.sql": "SELECT 1;", "setup.sql": "SELECT 1;"])
        XCTAssertThrowsError(try Migrator.loadMigrations(from: bad)) { error in
            XCTAssertEqual(error as? MigrationError, .invalidFileName("setup.sql"))
        }
        let duplicate = try makeDirectory(["0001_a.sql": "SELECT 1;", "001_b.sql": "SELECT 1;"])
        XCTAssertThrowsError(try Migrator.loadMigrations(from: duplicate)) { error in
            XCTAssertEqual(error as? MigrationError, .duplicateVersion(1, ["0001_a.sql", "001_b.sql"]))
        }
        XCTAssertThrowsError(try Migrator.loadMigrations(from: "/nonexistent/migrations")) { error in
            XCTAssertEqual(error as? MigrationError, .directoryNotFound("/nonexistent/migrations"))
        }
    }

    func testRepositoryMigrationsApplyAndEnableGeoExtensions() throws {
        let directory = try XCTUnwrap(Migrator.defaultDirectory(), "the package's migrations directory")
        XCTAssertTrue(directory.hasSuffix("/migrations"), directory)
        let url = try TestPostgres.shared().makeDatabase(prefix: "repo")
        try Migrator(connectionString: url, directory: directory).migrate()
        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }
        let extensions = try connection.query("SELECT extname FROM pg_extension WHERE extname IN ('cube', 'earthdistance') ORDER BY extname")
        XCTAssertEqual(extensions.map { $0["extname"].string }, ["cube", "earthdistance"])
    }

    /// earthdistance is not a trusted extension on PostgreSQL 15 (cube is): a database owner that
    /// is not a superuser gets a clear error naming the command a superuser must run, and the
    /// migrations apply once that was done.
    func testUntrustedExtensionTellsTheOperatorWhatASuperuserMustRun() throws {
        let postgres = try TestPostgres.shared()
        let role = "owner_\(getpid())_\(Int.random(in: 0..<1_000_000))"
        let admin = try PostgresBlockingConnection(connectionString: postgres.connectionString())
        defer { admin.close() }
        try admin.execute("CREATE ROLE \(role) LOGIN")
        try admin.execute("CREATE DATABASE \(role) OWNER \(role)")
        let ownerURL = "host=127.0.0.1 port=\(postgres.port) user=\(role) dbname=\(role)"
        let directory = try XCTUnwrap(Migrator.defaultDirectory(), "the package's migrations directory")

        XCTAssertThrowsError(try Migrator(connectionString: ownerURL, directory: directory).migrate()) { error in
            XCTAssertEqual(error as? MigrationError,
                           .extensionNeedsSuperuser(version: 1, name: "extensions", extension: "earthdistance", database: role))
            XCTAssertTrue("\(error)".contains("CREATE EXTENSION IF NOT EXISTS earthdistance CASCADE"), "\(error)")
        }
        let superuser = try PostgresBlockingConnection(connectionString: postgres.connectionString(database: role))
        defer { superuser.close() }
        XCTAssertEqual(try superuser.query("SELECT count(*)::int8 AS n FROM schema_migrations").first?["n"].int, 0)
        XCTAssertEqual(try superuser.query("SELECT count(*)::int8 AS n FROM pg_extension WHERE extname = 'cube'").first?["n"].int, 0,
                       "the failed file was rolled back as a whole")

        try superuser.execute("CREATE EXTENSION IF NOT EXISTS earthdistance CASCADE")
        let applied = try Migrator(connectionString: ownerURL, directory: directory).migrate()
        XCTAssertEqual(applied.first?.fileName, "0001_extensions.sql")
        XCTAssertEqual(applied.count, try Migrator.loadMigrations(from: directory).count)
    }
}
