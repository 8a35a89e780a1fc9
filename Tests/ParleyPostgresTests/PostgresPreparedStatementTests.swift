import ParleyNet
import ParleyPostgres
import XCTest

final class PostgresPreparedStatementTests: XCTestCase {
    /// The statements prepared on the client's one connection, by SQL text (asked unprepared).
    private func preparedStatements(_ client: PostgresClient) async throws -> [String] {
        try await client.query("SELECT statement FROM pg_prepared_statements ORDER BY statement", prepared: false)
            .map { $0["statement"].string ?? "" }
    }

    func testFullCacheClosesTheLeastRecentlyUsedStatement() async throws {
        let test = try await TestClient(prefix: "lru") {
            $0.connectionsPerLoop = 1
            $0.maxPreparedStatements = 2
        }
        let client = test.client
        let a = "SELECT $1::int8 + 1 AS v", b = "SELECT $1::int8 + 2 AS v", c = "SELECT $1::int8 + 3 AS v"
        var answer = try await client.query(a, [.int(10)])
        XCTAssertEqual(answer.first?["v"].int, 11)
        answer = try await client.query(b, [.int(10)])
        XCTAssertEqual(answer.first?["v"].int, 12)
        var prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, [a, b])

        // a is used again, so b is the least recently used when c needs room.
        answer = try await client.query(a, [.int(20)])
        XCTAssertEqual(answer.first?["v"].int, 21)
        answer = try await client.query(c, [.int(20)])
        XCTAssertEqual(answer.first?["v"].int, 23)
        prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, [a, c])

        // b is prepared again under a new name, evicting a; every statement still answers.
        answer = try await client.query(b, [.int(30)])
        XCTAssertEqual(answer.first?["v"].int, 32)
        prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, [b, c])
        answer = try await client.query(c, [.int(30)])
        XCTAssertEqual(answer.first?["v"].int, 33)
        await test.shutdown()
    }

    /// The cache hashes only the end of long statements: ones that differ only before it (same
    /// length, the same last 250 bytes) are still distinct statements with their own results.
    func testStatementsDifferingOnlyAtTheStartStayApart() async throws {
        let test = try await TestClient(prefix: "phash") { $0.connectionsPerLoop = 1 }
        let client = test.client
        let tail = " AS v FROM generate_series(1, 1) AS g WHERE g > 0 " + String(repeating: "AND g IS NOT NULL ", count: 12)
        let statements = (1...3).map { "SELECT $1::int8 + \($0)" + tail }
        for _ in 0..<2 {
            for (index, sql) in statements.enumerated() {
                let answer = try await client.query(sql, [.int(100)])
                XCTAssertEqual(answer.first?["v"].int, 101 + index, sql)
            }
        }
        let prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, statements.sorted())
        await test.shutdown()
    }

    func testSameTextWithOtherParameterTypesIsAnotherStatement() async throws {
        let test = try await TestClient(prefix: "ptypes") { $0.connectionsPerLoop = 1 }
        let client = test.client
        let sql = "SELECT $1 AS v, pg_typeof($1)::text AS t"
        let asInt = try await client.query(sql, [.int(7)])
        XCTAssertEqual(asInt.first?["t"].string, "bigint")
        let asDouble = try await client.query(sql, [.double(7.5)])
        XCTAssertEqual(asDouble.first?["t"].string, "double precision")
        XCTAssertEqual(asDouble.first?["v"].double, 7.5)
        let again = try await client.query(sql, [.int(8)])
        XCTAssertEqual(again.first?["v"].int, 8)
        let prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, [sql, sql])
        await test.shutdown()
    }

    func testChangedResultColumnsArePreparedAfreshAndDecodedByName() async throws {
        let test = try await TestClient(prefix: "stale") { $0.connectionsPerLoop = 1 }
        let client = test.client
        try await client.query("CREATE TABLE things (id int8 PRIMARY KEY, label text)", prepared: false)
        try await client.query("INSERT INTO things VALUES (1, 'one')", prepared: false)
        let select = "SELECT * FROM things WHERE id = $1"
        var rows = try await client.query(select, [.int(1)])
        XCTAssertEqual(rows.first?["label"].string, "one")
        rows = try await client.query(select, [.int(1)])
        XCTAssertEqual(rows.columns.names, ["id", "label"])

        // The cached plan no longer matches the table: that execution fails (SQLSTATE 0A000),
        // the statement is closed and the next execution prepares it again.
        try await client.query("ALTER TABLE things ADD COLUMN note text DEFAULT 'n'", prepared: false)
        do throws(PostgresError) {
            _ = try await client.query(select, [.int(1)])
            XCTFail("expected the stale plan to fail")
        } catch {
            XCTAssertEqual(error.sqlState, "0A000", "\(error)")
        }
        rows = try await client.query(select, [.int(1)])
        XCTAssertEqual(rows.columns.names, ["id", "label", "note"])
        XCTAssertEqual(rows.first?["note"].string, "n")
        XCTAssertEqual(rows.first?["label"].string, "one")
        let prepared = try await preparedStatements(client)
        XCTAssertEqual(prepared, [select])
        await test.shutdown()
    }

    func testNULInSQLTextFailsOnlyThatStatement() async throws {
        let test = try await TestClient(prefix: "nul") { $0.connectionsPerLoop = 1 }
        do throws(PostgresError) {
            _ = try await test.client.query("SELECT 1\u{0} AS v")
            XCTFail("expected NUL to be refused")
        } catch {
            XCTAssertTrue("\(error)".contains("NUL"), "\(error)")
        }
        do throws(PostgresError) {
            _ = try await test.client.query("SELECT $1::text AS v", [.text("a\u{0}b")])
            XCTFail("expected NUL to be refused")
        } catch {
            XCTAssertTrue("\(error)".contains("parameter $1"), "\(error)")
        }
        let rows = try await test.client.query("SELECT $1::text AS v, $2::text AS w", [.text("ok"), .null])
        XCTAssertEqual(rows.first?["v"].string, "ok")
        XCTAssertTrue(rows.first?["w"].isNull ?? false)
        await test.shutdown()
    }
}
