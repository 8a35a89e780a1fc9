import Foundation
import ParleyMigrations
import ParleyPostgres
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

    /// PostgreSQL crashes under a running server: `/ready` and Parse requests are answered at
    /// once (503 / 500 code 1, as docs/rest-api.md says) instead of after the pool's wait timeout,
    /// and the server recovers by itself when PostgreSQL is back.
    func testReadyReportsUnavailableDatabase() throws {
        let postgres = try TestPostgres.makePrivate()
        defer { postgres.remove() }
        let url = try postgres.makeDatabase(prefix: "outage")
        let server = try ParleyServerProcess(arguments: ["--allow-client-class-creation"], databaseURL: url)
        let client = try TestHTTPClient(port: server.port)
        let parse = [("X-Parse-Application-Id", "parley")]
        XCTAssertEqual(try client.request("POST", "/parse/classes/Note", headers: parse, json: #"{"n":1}"#).status, 201)

        // The test cluster commits asynchronously: make what ran so far (the migrations, the write)
        // durable, or the crash below may take it back.
        _ = try PostgresBlockingConnection(connectionString: url).query("CHECKPOINT", [])
        try postgres.cluster.stop(mode: .immediate)
        // The pools notice at their first failed reconnect (tens of milliseconds).
        XCTAssertTrue(eventually(timeout: 5) { (try? TestHTTPClient(port: server.port).request("GET", "/ready").status) == 503 },
                      "/ready did not answer 503 within 5 s of PostgreSQL stopping: \(server.log)")

        func timed(_ body: () throws -> TestHTTPClient.Response) rethrows -> (TestHTTPClient.Response, TimeInterval) {
            let started = Date()
            let response = try body()
            return (response, Date().timeIntervalSince(started))
        }
        let (ready, readyTime) = try timed { try client.request("GET", "/ready") }
        XCTAssertEqual(ready.status, 503)
        XCTAssertEqual((ready.json as? [String: Any])?["status"] as? String, "unavailable")
        XCTAssertTrue(((ready.json as? [String: Any])?["reason"] as? String ?? "").contains("unreachable"), ready.text)
        XCTAssertLessThan(readyTime, 1)
        for (method, path, body) in [("GET", "/parse/classes/Note", nil), ("POST", "/parse/classes/Note", #"{"n":2}"#),
                                     ("POST", "/parse/login", #"{"username":"a","password":"b"}"#)] {
            let (response, time) = try timed {
                try body.map { try client.request(method, path, headers: parse, json: $0) } ?? client.request(method, path, headers: parse)
            }
            XCTAssertEqual(response.status, 500, "\(method) \(path): \(response.text)")
            XCTAssertEqual((response.json as? [String: Any])?["code"] as? Int, 1, response.text)
            XCTAssertLessThan(time, 1, "\(method) \(path)")
        }
        let metrics = try client.request("GET", "/metrics").text
        XCTAssertTrue(metrics.contains("parley_postgres_unreachable 2"), metrics)

        try postgres.cluster.start()
        XCTAssertTrue(eventually(timeout: 20) { (try? TestHTTPClient(port: server.port).request("GET", "/ready").status) == 200 }, server.log)
        let found = try client.request("GET", "/parse/classes/Note", headers: parse)
        XCTAssertEqual(found.status, 200, found.text)
        XCTAssertTrue(server.log.contains("PostgreSQL reachable again"), server.log)
    }

    func testMetricsTokenGuardsMetrics() throws {
        let token = "m-\(UUID().uuidString)"
        let server = try ParleyServerProcess(environment: ["PARLEY_METRICS_TOKEN": token])
        let client = try TestHTTPClient(port: server.port)
        for authorization in [nil, "Bearer wrong", "Bearer \(token)x", "Bearer \(token.dropLast())", "Basic \(token)", "Bearer",
                              "Bearer ", "Bearer  \(token)", "\(token)"] as [String?] {
            let response = try client.request("GET", "/metrics", headers: authorization.map { [("Authorization", $0)] } ?? [])
            XCTAssertEqual(response.status, 401, "\(String(describing: authorization))")
            XCTAssertEqual(response.header("WWW-Authenticate"), #"Bearer realm="metrics""#)
            XCTAssertFalse(response.text.contains("parley_"), response.text)
        }
        for authorization in ["Bearer \(token)", "bearer \(token)", "BEARER \(token)"] {
            let response = try client.request("GET", "/metrics", headers: [("Authorization", authorization)])
            XCTAssertEqual(response.status, 200, authorization)
            XCTAssertTrue(response.text.contains("parley_http_requests_total"), response.text)
        }
        // The other health endpoints stay open.
        XCTAssertEqual(try client.request("GET", "/health").status, 200)
        XCTAssertEqual(try client.request("GET", "/ready").status, 200)
    }

    func testServeRefusesToStartWhenMigrationsCannotRun() throws {
        let postgres = try TestPostgres.shared()
        // A database name that does not exist: PostgreSQL answers, but every connection fails.
        XCTAssertThrowsError(try ParleyServerProcess(databaseURL: postgres.connectionString(database: "missing_db_\(getpid())"))) { error in
            guard case ServerProcessError.exited(let status, let log) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(status, 1)
            XCTAssertTrue(log.contains("missing_db_"), log)
        }
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
        XCTAssertTrue(WaitUntil.holds {
            (try? TestHTTPClient(port: server.port).request("GET", "/test/sleeping"))?.text == "1"
        }, "the slow request reached its handler")
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
    /// The binary is copied out of the build tree and run from another directory with no flag
    /// naming the repository: it carries its migrations, and the default `./.parley` is under its
    /// working directory.
    func testServeRunsEmbeddedPostgresAndStopsItOnSIGTERM() throws {
        let workDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-embedded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: workDirectory, withIntermediateDirectories: true)
        chmod(workDirectory.path, 0o755)
        defer { try? FileManager.default.removeItem(at: workDirectory) }
        let binary = workDirectory.appendingPathComponent("parley")
        try FileManager.default.copyItem(at: URL(fileURLWithPath: ParleyServerProcess.binaryPath), to: binary)
        let dataDirectory = workDirectory.appendingPathComponent(".parley")

        let portFile = workDirectory.appendingPathComponent("serve.port")
        let process = Process()
        process.executableURL = binary
        process.currentDirectoryURL = workDirectory
        process.arguments = ["serve", "--host", "127.0.0.1", "--port", "0", "--port-file", portFile.path]
        var environment = ProcessInfo.processInfo.environment
        for name in ["DATABASE_URL", "PARLEY_DATA_DIR", "PARLEY_MIGRATIONS_DIR"] { environment.removeValue(forKey: name) }
        process.environment = environment
        let logFile = workDirectory.appendingPathComponent("serve.log")
        FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let log = try FileHandle(forWritingTo: logFile)
        process.standardError = log
        process.standardOutput = log
        try process.run()
        func serverLog() -> String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

        // Port 0: the port the server bound is read back from its --port-file.
        var port = 0
        let ready = WaitUntil.holds(timeout: .seconds(90), interval: .milliseconds(100)) {
            guard process.isRunning else { return true }
            if port == 0, let text = try? String(contentsOf: portFile, encoding: .utf8) {
                port = Int(text.prefix { $0 != "\n" }) ?? 0
            }
            return port != 0 && (try? TestHTTPClient(port: port).request("GET", "/ready"))?.status == 200
        } && process.isRunning
        XCTAssertTrue(ready, "embedded server never became ready: \(serverLog())")
        let pidFile = dataDirectory.appendingPathComponent("postgres/data/postmaster.pid").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: pidFile), "no embedded PostgreSQL running under ./.parley")
        XCTAssertTrue(serverLog().contains("latest=8") || serverLog().contains("applied migrations"), serverLog())

        // `parley migrate` from yet another directory, on the same data directory (a relative path),
        // adopts the running cluster and leaves it running.
        let migrate = Process()
        migrate.executableURL = binary
        migrate.currentDirectoryURL = URL(fileURLWithPath: "/tmp")
        migrate.arguments = ["migrate", "--data-dir", "../" + String(dataDirectory.path.dropFirst("/".count))]
        migrate.environment = environment
        let output = Pipe()
        migrate.standardOutput = output
        migrate.standardError = Pipe()
        try migrate.run()
        migrate.waitUntilExit()
        XCTAssertEqual(migrate.terminationStatus, 0)
        XCTAssertEqual(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self), "database is up to date\n")
        XCTAssertEqual(try TestHTTPClient(port: port).request("GET", "/ready").status, 200, "migrate stopped the server's database")

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: pidFile), "embedded PostgreSQL still running after shutdown")
    }
}

/// The migrations compiled into the binary are the files of `migrations/`.
final class BundledMigrationsTests: XCTestCase {
    func testBundledMigrationsAreTheMigrationsDirectory() throws {
        let directory = ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path
        let files = try Migrator.loadMigrations(from: directory)
        let bundled = try Migrator.migrations(files: BundledMigrations.files)
        XCTAssertEqual(bundled.map(\.fileName), files.map(\.fileName))
        XCTAssertEqual(bundled, files, "the build embedded other text than migrations/ holds: rebuild")
        XCTAssertGreaterThanOrEqual(bundled.count, 8)
    }
}

/// Polls `condition` every 50 ms until it holds or `timeout` seconds pass.
func eventually(timeout: TimeInterval, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(50_000)
    }
    return condition()
}
