import ParleyPostgres
import XCTest

/// `PostgresCursor`: pages of one SELECT, interleaved with other statements on the same
/// connection, closed explicitly or when released, lost with its session.
final class PostgresCursorTests: XCTestCase {
    func testPagesInterleaveWithOtherStatementsAndCursorsClose() async throws {
        let t = try await TestClient(prefix: "cursor", configure: { $0.connectionsPerLoop = 1 })
        let (cursor, first) = try await t.client.cursor("SELECT i, repeat('x', $1::int) AS pad FROM generate_series(1, 1000) AS i ORDER BY i", [.text("100")], first: 3)
        XCTAssertEqual(first.map { $0["i"].int }, [1, 2, 3])
        XCTAssertEqual(t.client.stats.openCursors, 1)
        var seen = 3
        while true {
            // A statement of its own on the same (only) connection between two pages.
            let other = try await t.client.query("SELECT $1::int + 1 AS n", [.text(String(seen))])
            XCTAssertEqual(other.first?["n"].int, seen + 1)
            let page = try await cursor.fetch(400)
            if page.isEmpty { break }
            XCTAssertEqual(page.first?["i"].int, seen + 1)
            seen += page.count
        }
        XCTAssertEqual(seen, 1000)
        cursor.close()
        let closed = await eventually { t.client.stats.openCursors == 0 }
        XCTAssertTrue(closed)
        do {
            _ = try await cursor.fetch(1)
            XCTFail("a closed cursor fetches nothing")
        } catch {}

        // Released without close(): its deinit closes it on the server.
        do {
            let (released, _) = try await t.client.cursor("SELECT i FROM generate_series(1, 10) AS i", first: 1)
            XCTAssertEqual(t.client.stats.openCursors, 1)
            _ = released
        }
        let closedByDeinit = await eventually { t.client.stats.openCursors == 0 }
        XCTAssertTrue(closedByDeinit)
        let held = try await t.client.query("SELECT count(*) AS n FROM pg_cursors WHERE name LIKE 'parley_cursor_%'", [], prepared: false)
        XCTAssertEqual(held.first?["n"].int, 0, "the server holds no cursor on the connection")

        // A SELECT PostgreSQL refuses: the DECLARE's error, and nothing left open.
        do {
            _ = try await t.client.cursor("SELECT no_such_column FROM generate_series(1, 3)", first: 1)
            XCTFail("the DECLARE should fail")
        } catch let error as PostgresError {
            XCTAssertEqual(error.sqlState, "42703", "\(error)")
        }
        XCTAssertEqual(t.client.stats.openCursors, 0)
        let one = try await t.client.query("SELECT 1 AS one")
        XCTAssertEqual(one.first?["one"].int, 1)
        await t.shutdown()
    }

    func testACursorIsLostWithItsConnection() async throws {
        let t = try await TestClient(prefix: "cursorlost", configure: { $0.connectionsPerLoop = 1 })
        let (cursor, _) = try await t.client.cursor("SELECT i FROM generate_series(1, 100) AS i", first: 1)
        let pid = try await t.client.query("SELECT pg_backend_pid() AS pid").first?["pid"].int ?? 0
        let other = try PostgresBlockingConnection(connectionString: t.connectionString)
        _ = try other.query("SELECT pg_terminate_backend($1::int)", [.text(String(pid))])
        let reconnected = await eventually { (try? await t.client.query("SELECT pg_backend_pid() AS pid").first?["pid"].int).map { $0 != pid } ?? false }
        XCTAssertTrue(reconnected)
        do {
            _ = try await cursor.fetch(10)
            XCTFail("the cursor went with its session")
        } catch PostgresError.connectionClosed {
        } catch {
            XCTFail("\(error)")
        }
        cursor.close()
        let forgotten = await eventually { t.client.stats.openCursors == 0 }
        XCTAssertTrue(forgotten)
        await t.shutdown()
    }
}
