import Foundation
import ParleyMigrations
import ParleyPostgres
import ParleyServer
import ParleyTestSupport
import XCTest

/// `parley stats` as a real process against a real database holding known rows.
final class StatsCommandTests: XCTestCase {
    private func parley(_ arguments: [String], databaseURL: String) throws -> (status: Int32, output: String, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = databaseURL
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text, errorText)
    }

    func testStatsCountsEachDomainsRows() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "stats")
        try Migrator(connectionString: url, source: .files(BundledMigrations.files)).migrate()
        let connection = try PostgresBlockingConnection(connectionString: url)
        defer { connection.close() }

        let empty = try parley(["stats", "--json"], databaseURL: url)
        XCTAssertEqual(empty.status, 0, empty.errors)
        let zero = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(empty.output.utf8)) as? [String: Any], empty.output)
        XCTAssertEqual(zero["users"] as? Int, 0)
        XCTAssertEqual(zero["pushJobs"] as? [String: Int], ["pending": 0, "sending": 0, "sent": 0, "dead": 0, "rejected": 0,
                                                           "skipped": 0, "canceled": 0, "expired": 0])

        try connection.execute("""
            INSERT INTO users (object_id, username, banned) VALUES ('u1', 'ann', false), ('u2', 'bob', false), ('u3', 'cy', true);
            INSERT INTO sessions (object_id, token, user_id, expires_at) VALUES
                ('s1', 'r:1', 'u1', now() + interval '1 day'), ('s2', 'r:2', 'u2', now() + interval '1 day'),
                ('s3', 'r:3', 'u2', now() - interval '1 minute');
            INSERT INTO rt_nodes (node_id, heartbeat_at) VALUES ('live', now()), ('stopped', now() - interval '1 hour');
            INSERT INTO rt_devices (user_id, device_id, node_id) VALUES
                ('u1', 'phone', 'live'), ('u2', 'phone', 'live'), ('u2', 'tablet', 'stopped'), ('u1', 'laptop', NULL);
            INSERT INTO rt_queue (user_id, device_id, seq, kind) SELECT 'u1', 'laptop', i, 'call.x' FROM generate_series(1, 5) i;
            INSERT INTO push_jobs (kind, state, user_id, device_id, platform, token, collapse_key) VALUES
                ('message', 'pending', 'u1', 'i1', 1, 't', 'a'), ('message', 'pending', 'u2', 'i2', 2, 't', 'b'),
                ('call', 'dead', 'u2', 'i2', 2, 't', 'c');
            INSERT INTO calls (id, caller_id, caller_device, callee_id, video, state, started_at, ended_at, end_cause) VALUES
                ('00000000-0000-0000-0000-000000000001', 'u1', 'phone', 'u2', false, 'ringing', now(), NULL, NULL),
                ('00000000-0000-0000-0000-000000000002', 'u1', 'phone', 'u2', true, 'ended', now(), now(), 'hungUp'),
                ('00000000-0000-0000-0000-000000000003', 'u2', 'phone', 'u1', false, 'ended',
                 date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 hour', now(), 'noAnswer');
            """)

        let result = try parley(["stats", "--json"], databaseURL: url)
        XCTAssertEqual(result.status, 0, result.errors)
        let stats = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any], result.output)
        XCTAssertEqual(stats["users"] as? Int, 3)
        XCTAssertEqual(stats["bannedUsers"] as? Int, 1)
        XCTAssertEqual(stats["activeSessions"] as? Int, 2)
        XCTAssertEqual(stats["devicesOnline"] as? Int, 2, "a device on a stopped node is not online")
        XCTAssertEqual(stats["devices"] as? Int, 4)
        XCTAssertEqual(stats["liveNodes"] as? Int, 1)
        XCTAssertEqual(stats["queuedEvents"] as? Int, 5)
        XCTAssertEqual(stats["pushJobs"] as? [String: Int], ["pending": 2, "sending": 0, "sent": 0, "dead": 1, "rejected": 0,
                                                            "skipped": 0, "canceled": 0, "expired": 0])
        XCTAssertEqual(stats["callsToday"] as? Int, 2, "a call started before midnight UTC is not today's")
        XCTAssertEqual(stats["liveCalls"] as? Int, 1)
        XCTAssertNotNil((stats["at"] as? String)?.hasSuffix("Z"))

        let text = try parley(["stats"], databaseURL: url)
        XCTAssertEqual(text.status, 0, text.errors)
        for line in ["users           3 (1 banned, 2 active sessions)", "devices online  2 of 4 (1 live node)", "queued events   5",
                     "push jobs       pending 2, sending 0, sent 0, dead 1, rejected 0, skipped 0, canceled 0, expired 0",
                     "calls today     2 (1 live)"] {
            XCTAssertTrue(text.output.contains(line + "\n"), "missing \(line) in\n\(text.output)")
        }
    }

    func testStatsRejectsUnknownArgumentsAndReportsAnUnreachableDatabase() throws {
        let url = try TestPostgres.shared().makeDatabase(prefix: "statsbad")
        let bad = try parley(["stats", "--csv"], databaseURL: url)
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.errors.contains("unknown argument --csv"), bad.errors)
        XCTAssertTrue(bad.errors.contains("Usage: parley stats"), bad.errors)

        let help = try parley(["stats", "--help"], databaseURL: url)
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.output.contains("Usage: parley stats [--json]"), help.output)

        let closedPort = FreePort.next()
        let down = try parley(["stats", "--json"], databaseURL: "host=127.0.0.1 port=\(closedPort) user=postgres dbname=postgres connect_timeout=2")
        XCTAssertEqual(down.status, 1)
        XCTAssertTrue(down.errors.hasPrefix("parley: "), down.errors)
        XCTAssertEqual(down.output, "")
    }
}
