import ParleyNet
import ParleyPostgres
import XCTest

/// Reads (`PostgresClient.read`) sent in the same loop turn share one sync: PostgreSQL runs them
/// as one implicit transaction, so they all see the same `now()`.
final class PostgresBatchTests: XCTestCase {
    /// One statement for each entry, all started in the same loop turn; `read` says which way.
    private func runInOneTurn(_ client: PostgresClient, on loop: EventLoop, _ statements: [(sql: String, params: [PostgresData], read: Bool)])
        async throws -> [Result<PostgresRows, PostgresError>] {
        try await onLoop(loop) { () async throws -> [Result<PostgresRows, PostgresError>] in
            try await withThrowingTaskGroup(of: (Int, Result<PostgresRows, PostgresError>).self) { group in
                for (index, statement) in statements.enumerated() {
                    group.addTask {
                        do throws(PostgresError) {
                            let rows = statement.read
                                ? try await client.read(statement.sql, statement.params)
                                : try await client.query(statement.sql, statement.params)
                            return (index, .success(rows))
                        } catch {
                            return (index, .failure(error))
                        }
                    }
                }
                var outcomes = [Result<PostgresRows, PostgresError>?](repeating: nil, count: statements.count)
                for try await (index, outcome) in group { outcomes[index] = outcome }
                return outcomes.map { $0! }
            }
        }
    }

    func testReadsOfOneTurnRunInOneImplicitTransaction() async throws {
        let test = try await TestClient(prefix: "batch") { $0.connectionsPerLoop = 1 }
        let reads = (0..<20).map { (sql: "SELECT $1::int8 AS v, now()::text AS t, pg_backend_pid() AS pid", params: [PostgresData.int($0)], read: true) }
        let outcomes = try await runInOneTurn(test.client, on: test.group.loops[0], reads)
        let rows = try outcomes.map { try $0.get() }
        XCTAssertEqual(rows.map { $0.first?["v"].int }, (0..<20).map { Optional($0) })
        XCTAssertEqual(Set(rows.map { $0.first?["pid"].int }).count, 1)
        XCTAssertEqual(Set(rows.map { $0.first?["t"].string }).count, 1, "one transaction start for the whole batch")

        // Reads of later turns get their own transaction.
        let first = try await test.client.read("SELECT now()::text AS t")
        try await Task.sleep(for: .milliseconds(5))
        let second = try await test.client.read("SELECT now()::text AS t")
        XCTAssertNotEqual(first.first?["t"].string, second.first?["t"].string)
        XCTAssertNotEqual(first.first?["t"].string, rows[0].first?["t"].string)
        await test.shutdown()
    }

    func testAFailedReadFailsOnlyItselfAndTheOthersOfItsBatchAreSentAgain() async throws {
        let test = try await TestClient(prefix: "batcherr") { $0.connectionsPerLoop = 1 }
        let statements: [(sql: String, params: [PostgresData], read: Bool)] = [
            ("SELECT $1::int8 AS v", [.int(1)], true),
            ("SELECT 1 / $1::int8 AS v", [.int(0)], true),           // division by zero
            ("SELECT $1::int8 AS v", [.int(3)], true),                // skipped by the server, sent again
            ("SELEKT broken", [], true),                               // prepare fails
            ("SELECT $1::int8 + 1 AS v", [.int(4)], true),            // a new prepared statement behind it
            ("SELECT $1::int8 AS v", [.int(6)], false),               // its own sync: closes the batch
            ("SELECT $1::int8 AS v", [.int(7)], true),
            ("SELECT $1::int8 AS v", [.int(8)], true),
        ]
        let outcomes = try await runInOneTurn(test.client, on: test.group.loops[0], statements)
        XCTAssertEqual(try outcomes[0].get().first?["v"].int, 1)
        XCTAssertEqual(outcomes[1].failureSQLState, "22012")
        XCTAssertEqual(try outcomes[2].get().first?["v"].int, 3)
        XCTAssertEqual(outcomes[3].failureSQLState, "42601")
        XCTAssertEqual(try outcomes[4].get().first?["v"].int, 5)
        XCTAssertEqual(try outcomes[5].get().first?["v"].int, 6)
        XCTAssertEqual(try outcomes[6].get().first?["v"].int, 7)
        XCTAssertEqual(try outcomes[7].get().first?["v"].int, 8)
        XCTAssertEqual(test.client.stats.queriesInFlight, 0)

        // The prepared statements that were skipped work on their own afterwards.
        let again = try await test.client.read("SELECT $1::int8 + 1 AS v", [.int(9)])
        XCTAssertEqual(again.first?["v"].int, 10)
        await test.shutdown()
    }

    func testATransactionAfterReadsOfTheSameTurnIsNotPartOfTheirBatch() async throws {
        let test = try await TestClient(prefix: "batchtx") { $0.connectionsPerLoop = 2 }
        try await test.client.query("CREATE TABLE t (v int)")
        let client = test.client
        let (reads, inserted) = try await onLoop(test.group.loops[0]) { () async throws -> ([Int], Int) in
            async let a = client.read("SELECT 1 AS v")
            async let b = client.read("SELECT 2 AS v")
            async let written = client.transaction { tx in
                try await tx.query("INSERT INTO t VALUES (1)")
                return try await tx.query("SELECT count(*)::int8 AS n FROM t").first?["n"].int ?? -1
            }
            return try await ([a.first?["v"].int ?? -1, b.first?["v"].int ?? -1], written)
        }
        XCTAssertEqual(reads, [1, 2])
        XCTAssertEqual(inserted, 1)
        let count = try await test.client.read("SELECT count(*)::int8 AS n FROM t")
        XCTAssertEqual(count.first?["n"].int, 1)
        await test.shutdown()
    }
}
