import Foundation
import ParleyServer
import ParleyTestSupport
import XCTest

/// `parley serve` as a real process: endpoints, configuration errors, graceful shutdown.
final class ServeTests: XCTestCase {
    func testHealthReadyAndMetrics() throws {
        let server = try ParleyServerProcess()
        let client = try TestHTTPClient(port: server.port)

        let health = try client.request("GET", "/health")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.header("Content-Type"), "application/json")
        XCTAssertEqual(health.json as? [String: String], ["status": "ok"])
        XCTAssertNotNil(health.header("Date"))

        let ready = try client.request("GET", "/ready")
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual((ready.json as? [String: Any])?["status"] as? String, "ready")

        let metrics = try client.request("GET", "/metrics")
        XCTAssertEqual(metrics.status, 200)
        let text = metrics.text
        XCTAssertTrue(text.contains(#"parley_http_requests_total{route="/health",status="2xx"} 1"#), text)
        XCTAssertTrue(text.contains(#"parley_http_requests_total{route="/ready",status="2xx"} "#), text)
        XCTAssertTrue(text.contains("parley_http_request_duration_seconds_bucket"), text)
        XCTAssertTrue(text.contains("parley_open_connections 1"), text)
        XCTAssertTrue(text.contains(#"parley_event_loop_lag_seconds{loop="1"}"#), text)
        XCTAssertTrue(text.contains("parley_postgres_connections_open"), text)

        let missing = try client.request("GET", "/nope")
        XCTAssertEqual(missing.status, 404)
        let wrongMethod = try client.request("DELETE", "/health")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.header("Allow"), "GET, HEAD")
    }

    func testReadyReportsUnavailableDatabase() throws {
        let postgres = try TestPostgres.shared()
        // A database name that does not exist: PostgreSQL answers, but every connection fails.
        let server = try? ParleyServerProcess(databaseURL: postgres.connectionString(database: "missing_db_\(getpid())"))
        XCTAssertNil(server, "serve must refuse to start when migrations cannot run")
    }

    func testUnknownFlagAndBadValueExitWithUsageError() throws {
        for arguments in [["serve", "--no-such-flag"], ["serve", "--port", "99999"], ["serve", "--idle-timeout", "soon"],
                          ["serve", "--public-url", "api.example.com"], ["serve", "--public-url", "https://x.example/?q=1"],
                          ["serve", "--trusted-proxies", "10.0.0.0/8,not-an-address"], ["serve", "--trusted-proxies", "10.0.0.0/33"]] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
            process.arguments = arguments
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = Pipe()
            try process.run()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 2, "\(arguments)")
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            XCTAssertTrue(message.hasPrefix("parley: "), message)
        }
    }

    func testNodeLossTimingIsConfigurable() throws {
        let defaults = try ServerConfig(ConfigValues(options: ServerConfig.options, arguments: [], environment: [:]))
        XCTAssertEqual(defaults.realtime.nodeStaleAfter, .seconds(45))
        XCTAssertEqual(defaults.calls.nodeSweepInterval, .seconds(60))
        let set = try ServerConfig(ConfigValues(options: ServerConfig.options, arguments: ["--realtime-node-stale-after", "20s"],
                                                environment: ["PARLEY_CALL_NODE_SWEEP_INTERVAL": "5s"]))
        XCTAssertEqual(set.realtime.nodeStaleAfter, .seconds(20))
        XCTAssertEqual(set.calls.nodeSweepInterval, .seconds(5))
        for arguments in [["--realtime-node-stale-after", "10s"], ["--call-node-sweep-interval", "500ms"]] {
            XCTAssertThrowsError(try ServerConfig(ConfigValues(options: ServerConfig.options, arguments: arguments, environment: [:])), "\(arguments)")
        }
    }

    func testHelpDocumentsEveryOptionAndDocsMatch() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
        process.arguments = ["help", "serve", "--markdown"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        let table = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(table.contains("`--database-url` | `DATABASE_URL`"), table)
        let docs = try String(contentsOf: ParleyServerProcess.repositoryRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        XCTAssertTrue(docs.contains(table), "docs/configuration.md is out of date: regenerate its table with `parley help serve --markdown`")
    }

    func testSIGTERMLetsInFlightRequestFinishThenExitsZero() throws {
        let server = try ParleyServerProcess(arguments: ["--enable-test-endpoints"])
        let slow = try TestHTTPClient(port: server.port)
        try slow.send("GET /test/sleep?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n")
        usleep(300_000)
        server.send(signal: SIGTERM)
        let response = try slow.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, "slept 1500 ms")
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertEqual(server.waitForExit(), 0, server.log)
        XCTAssertTrue(server.log.contains("signal received"), server.log)
        // New connections are refused once the server stopped listening.
        XCTAssertThrowsError(try TestHTTPClient(port: server.port))
    }

    func testMigrateCommandIsIdempotent() throws {
        let postgres = try TestPostgres.shared()
        let url = try postgres.makeDatabase(prefix: "migrate")
        for expected in ["applied", "up to date"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
            process.arguments = ["migrate", "--migrations-dir", ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path]
            var env = ProcessInfo.processInfo.environment
            env["DATABASE_URL"] = url
            process.environment = env
            let output = Pipe()
            process.standardOutput = output
            process.standardError = Pipe()
            try process.run()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            XCTAssertTrue(text.contains(expected), text)
        }
    }
}

/// `parley serve` with no DATABASE_URL: it initialises, runs and stops its own PostgreSQL.
final class EmbeddedDatabaseServeTests: XCTestCase {
    func testServeRunsEmbeddedPostgresAndStopsItOnSIGTERM() throws {
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-embedded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        chmod(dataDirectory.path, 0o755)
        defer { try? FileManager.default.removeItem(at: dataDirectory) }

        let port = FreePort.next()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
        process.arguments = ["serve", "--host", "127.0.0.1", "--port", "\(port)", "--data-dir", dataDirectory.path,
                             "--migrations-dir", ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path]
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DATABASE_URL")
        process.environment = environment
        let log = Pipe()
        process.standardError = log
        process.standardOutput = log
        try process.run()

        var ready = false
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline && process.isRunning {
            if let response = try? TestHTTPClient(port: port).request("GET", "/ready"), response.status == 200 {
                ready = true
                break
            }
            usleep(100_000)
        }
        XCTAssertTrue(ready, "embedded server never became ready")
        let pidFile = dataDirectory.appendingPathComponent("postgres/data/postmaster.pid").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: pidFile), "no embedded PostgreSQL running")

        // `parley migrate` on the same data directory adopts the running cluster and leaves it running.
        let migrate = Process()
        migrate.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
        migrate.arguments = ["migrate", "--data-dir", dataDirectory.path,
                             "--migrations-dir", ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path]
        migrate.environment = environment
        migrate.standardOutput = Pipe()
        migrate.standardError = Pipe()
        try migrate.run()
        migrate.waitUntilExit()
        XCTAssertEqual(migrate.terminationStatus, 0)
        XCTAssertEqual(try TestHTTPClient(port: port).request("GET", "/ready").status, 200, "migrate stopped the server's database")

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: pidFile), "embedded PostgreSQL still running after shutdown")
    }
}
