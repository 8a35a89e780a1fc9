import ParleyMetrics
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

final class PostgresPipelineTests: XCTestCase {
    func testPipelineOfOneThousandQueriesInFlightAtOnce() async throws {
        let test = try await TestClient(prefix: "pipeline") {
            $0.connectionsPerLoop = 1
            $0.maxPipelineDepth = 2000
        }
        let client = test.client
        let loop = test.group.loops[0]
        // A slow statement at the head keeps everything behind it in flight on the one connection.
        let all = Task(executorPreference: loop) { () async throws -> [Int: Int] in
            try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                group.addTask {
                    try await client.query("SELECT pg_sleep(0.5)")
                    return (-1, -1)
                }
                for i in 0..<1000 {
                    group.addTask {
                        let rows = try await client.query("SELECT $1::int8 * 2 AS doubled, $2::text AS label", [.int(i), .text("q\(i)")])
                        XCTAssertEqual(rows.first?["label"].string, "q\(i)")
                        return (i, rows.first?["doubled"].int ?? -1)
                    }
                }
                var results: [Int: Int] = [:]
                for try await (i, value) in group { results[i] = value }
                return results
            }
        }
        let sawAllInFlight = await eventually(timeout: .seconds(5)) { client.stats.queriesInFlight >= 1000 }
        XCTAssertTrue(sawAllInFlight, "in flight: \(client.stats.queriesInFlight)")
        let results = try await all.value
        XCTAssertEqual(results.count, 1001)
        for i in 0..<1000 { XCTAssertEqual(results[i], i * 2) }
        XCTAssertEqual(client.stats.queriesInFlight, 0)
        await test.shutdown()
    }

    func testErrorMidPipelineFailsOnlyItsOwnQuery() async throws {
        let test = try await TestClient(prefix: "piperr") { $0.connectionsPerLoop = 1 }
        let client = test.client
        let outcomes = try await onLoop(test.group.loops[0]) { () async throws -> [Result<Int, PostgresError>] in
            try await withThrowingTaskGroup(of: (Int, Result<Int, PostgresError>).self) { group in
                let statements: [(String, [PostgresData], Bool)] = [
                    ("SELECT pg_sleep(0.2)::text::int + 1 AS v", [], false),
                    ("SELECT $1::int8 AS v", [.int(1)], true),
                    ("SELECT 1 / $1::int8 AS v", [.int(0)], true),      // division by zero
                    ("SELECT $1::int8 AS v", [.int(3)], true),
                    ("SELEKT broken", [], true),                         // prepare fails
                    ("SELECT $1::int8 AS v", [.int(5)], false),
                    ("SELEKT broken", [], true),                         // same text again: fails the same way
                    ("SELECT $1::int8 AS v", [.int(7)], true),
                ]
                for (index, statement) in statements.enumerated() {
                    group.addTask {
                        do throws(PostgresError) {
                            let rows = try await client.query(statement.0, statement.1, prepared: statement.2)
                            return (index, .success(rows.first?["v"].int ?? -1))
                        } catch {
                            return (index, .failure(error))
                        }
                    }
                }
                var outcomes = [Result<Int, PostgresError>?](repeating: nil, count: statements.count)
                for try await (index, outcome) in group { outcomes[index] = outcome }
                return outcomes.map { $0! }
            }
        }
        XCTAssertEqual(try outcomes[1].get(), 1)
        XCTAssertEqual(outcomes[2].failureSQLState, "22012")
        XCTAssertEqual(try outcomes[3].get(), 3)
        XCTAssertEqual(outcomes[4].failureSQLState, "42601")
        XCTAssertEqual(try outcomes[5].get(), 5)
        XCTAssertEqual(outcomes[6].failureSQLState, "42601")
        XCTAssertEqual(try outcomes[7].get(), 7)
        // pg_sleep returns void: casting it to text then int fails, only that statement.
        XCTAssertNotNil(outcomes[0].failureSQLState)
        // The connection is healthy afterwards.
        let after = try await client.query("SELECT 42 AS v")
        XCTAssertEqual(after.first?["v"].int, 42)
        await test.shutdown()
    }

    func testStatementTimeoutFailsTheStatementWithAClearError() async throws {
        let test = try await TestClient(prefix: "timeout") { $0.statementTimeout = .milliseconds(100) }
        do throws(PostgresError) {
            try await test.client.query("SELECT pg_sleep(2)")
            XCTFail("expected a statement timeout")
        } catch {
            XCTAssertTrue(error.isStatementTimeout, "\(error)")
            XCTAssertTrue("\(error)".contains("statement timeout"), "\(error)")
        }
        let setting = try await test.client.query("SELECT current_setting('statement_timeout') AS t")
        XCTAssertEqual(setting.first?["t"].string, "100ms")

        let registry = MetricsRegistry()
        test.client.registerMetrics(in: registry)
        let text = registry.render()
        XCTAssertTrue(text.contains("parley_postgres_connections_open 2"), text)
        XCTAssertTrue(text.contains("parley_postgres_waiters 0"), text)
        await test.shutdown()
    }

    /// A server that accepts connections and never answers: statements wait (the pool cannot
    /// know yet that nothing will come), at most `maxWaiters` of them, for `waitTimeout`.
    func testWaitingQueriesAreBoundedAndTimeOutWhileTheServerIsSilent() async throws {
        let silent = try SilentServer()
        let group = try EventLoopGroup(threads: 1)
        let client = PostgresClient(group: group, configuration: PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=\(silent.port) user=postgres dbname=postgres",
            maxWaiters: 2, waitTimeout: .milliseconds(300)))
        client.start()
        let started = ContinuousClock.now
        let outcomes = try await onLoop(group.loops[0]) { () async -> [PostgresError?] in
            await withTaskGroup(of: PostgresError?.self) { tasks in
                for _ in 0..<3 {
                    tasks.addTask {
                        do throws(PostgresError) { try await client.query("SELECT 1"); return nil } catch { return error }
                    }
                }
                var errors: [PostgresError?] = []
                for await error in tasks { errors.append(error) }
                return errors
            }
        }
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(outcomes.filter { if case .tooManyWaiters(2) = $0 { true } else { false } }.count, 1, "\(outcomes)")
        let unavailable = outcomes.compactMap { error -> String? in
            if case .connectionUnavailable(let reason) = error { return reason }
            return nil
        }
        XCTAssertEqual(unavailable.count, 2, "\(outcomes)")
        XCTAssertTrue(unavailable.first?.contains("waited") ?? false, unavailable.first ?? "")
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(250))
        XCTAssertEqual(client.stats.connectionsOpen, 0)
        XCTAssertEqual(client.stats.unreachablePools, 0)
        await client.shutdown()
        group.shutdownGracefully()
    }

    /// Nothing listens on the port: the first connect attempt fails, so the pool knows the server
    /// is unreachable and statements fail at once with the connect error, not after `waitTimeout`.
    func testQueriesFailAtOnceWhenTheServerRefusesConnections() async throws {
        let group = try EventLoopGroup(threads: 1)
        let port = FreePort.next()
        let client = PostgresClient(group: group, configuration: PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=\(port) user=postgres dbname=postgres", waitTimeout: .seconds(30)))
        client.start()
        let started = ContinuousClock.now
        for _ in 0..<3 {
            do throws(PostgresError) {
                try await client.query("SELECT 1")
                XCTFail("a statement succeeded with no server")
            } catch {
                guard case .connectionUnavailable(let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("unreachable") && reason.contains("last error") && reason.contains("refused"), reason)
            }
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
        XCTAssertEqual(client.stats.unreachablePools, 1)
        XCTAssertEqual(client.stats.waiters, 0)
        await client.shutdown()
        group.shutdownGracefully()
    }
}

extension Result where Failure == PostgresError {
    var failureSQLState: String? {
        if case .failure(let error) = self { return error.sqlState }
        return nil
    }
}
