import Foundation
import ParleyPostgres
import ParleyTestSupport
import XCTest

final class EmbeddedPostgresTests: XCTestCase {
    func testSharedTestClusterAcceptsConnections() throws {
        let postgres = try TestPostgres.shared()
        let url = try postgres.makeDatabase(prefix: "embedded")
        let rows = try PostgresBlockingConnection(connectionString: url).query("SELECT $1::int + 1 AS n", [.int(41)])
        XCTAssertEqual(rows.first?["n"].int, 42)
    }

    func testUnixSocketClusterInitialisesStartsReusesAndStops() throws {
        let directory = NSTemporaryDirectory() + "parley-embedded-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let cluster = EmbeddedPostgres(configuration: .init(dataDirectory: directory, durable: false))
        let url = try cluster.start()
        XCTAssertTrue(url.contains("dbname='parley'"), url)
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/postgres/data/PG_VERSION"))
        let client = try PostgresBlockingConnection(connectionString: url)
        try client.execute("CREATE EXTENSION IF NOT EXISTS cube; CREATE EXTENSION IF NOT EXISTS earthdistance")
        let distance = try client.query("SELECT earth_distance(ll_to_earth(0, 0), ll_to_earth(0, 1)) AS d")
        XCTAssertEqual(distance.first?["d"].double ?? 0, 111_320, accuracy: 1)
        // UTF-8 character classification (C.UTF-8 ctype), byte-order collation.
        XCTAssertEqual(try client.query("SELECT upper($1::text) AS u", [.text("é")]).first?["u"].string, "É")
        let listen = try client.query("SHOW listen_addresses")
        XCTAssertEqual(listen.first?[0].string, "")
        client.close()
        try cluster.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/postgres/data/postmaster.pid"))

        // A postmaster.pid left by a dead server (crash, reboot) does not block the next start.
        try "999999\n\(directory)/postgres/data\n0\n5432\n/nonexistent\n\n".write(
            toFile: directory + "/postgres/data/postmaster.pid", atomically: true, encoding: .utf8)

        // A second start reuses the initialised directory (and the data in it).
        let again = EmbeddedPostgres(configuration: .init(dataDirectory: directory, durable: false))
        let url2 = try again.start()
        let reopened = try PostgresBlockingConnection(connectionString: url2)
        XCTAssertEqual(try reopened.query("SELECT count(*) AS n FROM pg_extension WHERE extname = 'earthdistance'").first?["n"].int, 1)
        reopened.close()

        // A server left running on the directory (e.g. Parley was killed) is adopted, not started twice.
        let adopter = EmbeddedPostgres(configuration: .init(dataDirectory: directory, durable: false))
        XCTAssertEqual(try adopter.start(), url2)
        try adopter.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/postgres/data/postmaster.pid"))
        try again.stop()
    }

    func testLongDataDirectoryPutsTheSocketInShortTemporaryDirectory() throws {
        let base = NSTemporaryDirectory() + "parley-long-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        let directory = base + "/" + String(repeating: "d", count: 90)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(base, 0o755)
        chmod(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: base) }

        let cluster = EmbeddedPostgres(configuration: .init(dataDirectory: directory, durable: false))
        let url = try cluster.start()
        XCTAssertTrue(url.contains("host='/tmp/parley-"), url)
        let client = try PostgresBlockingConnection(connectionString: url)
        XCTAssertEqual(try client.query("SELECT 1 AS one").first?["one"].int, 1)
        client.close()
        try cluster.stop()
    }
}
