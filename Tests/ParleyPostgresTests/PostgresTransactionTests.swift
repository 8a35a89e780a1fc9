import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

private struct Abort: Error {}

final class PostgresTransactionTests: XCTestCase {
    func testCommitRollbackAndFailedStatementInsideTransaction() async throws {
        let test = try await TestClient(prefix: "tx")
        let client = test.client
        try await client.query("CREATE TABLE items (id bigint PRIMARY KEY, label text NOT NULL)", prepared: false)

        let committed = try await client.transaction { tx in
            try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(1), .text("one")])
            try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(2), .text("two")])
            return try await tx.query("SELECT count(*) AS n FROM items").first?["n"].int
        }
        XCTAssertEqual(committed, 2)

        // A thrown error rolls back everything done in the body.
        do {
            try await client.transaction { tx in
                try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(3), .text("three")])
                throw Abort()
            }
            XCTFail("expected the body's error")
        } catch is Abort {}

        // A failing statement rolls back and surfaces its error.
        do {
            try await client.transaction { tx in
                try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(4), .text("four")])
                try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(1), .text("duplicate")])
            }
            XCTFail("expected a unique violation")
        } catch let error as PostgresError {
            XCTAssertTrue(error.isUniqueViolation, "\(error)")
        }

        // A failed statement whose error is swallowed turns COMMIT into a rollback, reported as an error.
        do {
            try await client.transaction { tx in
                try await tx.query("INSERT INTO items VALUES ($1, $2)", [.int(5), .text("five")])
                _ = try? await tx.query("SELECT 1 / 0")
            }
            XCTFail("expected the rollback at COMMIT to be reported")
        } catch let error as PostgresError {
            XCTAssertEqual(error.sqlState, "25P02", "\(error)")
        }

        let ids = try await client.query("SELECT id FROM items ORDER BY id").map { $0["id"].int }
        XCTAssertEqual(ids, [1, 2])
        await test.shutdown()
    }

    func testPinnedConnectionIsNotSharedWhileTransactionIsOpen() async throws {
        let test = try await TestClient(prefix: "txpin") { $0.connectionsPerLoop = 2 }
        let client = test.client
        try await client.query("CREATE TABLE counter (n int)", prepared: false)
        try await client.query("INSERT INTO counter VALUES (0)")
        // While a transaction holds its uncommitted update, plain statements run on the other
        // connection and do not see it.
        try await client.transaction { tx in
            try await tx.query("UPDATE counter SET n = 1")
            for _ in 0..<20 {
                let seen = try await client.query("SELECT n FROM counter").first?["n"].int
                XCTAssertEqual(seen, 0)
            }
        }
        let after = try await client.query("SELECT n FROM counter").first?["n"].int
        XCTAssertEqual(after, 1)
        await test.shutdown()
    }
}
