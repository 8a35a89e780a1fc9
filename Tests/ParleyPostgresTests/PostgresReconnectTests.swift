import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import Synchronization
import XCTest

final class PostgresReconnectTests: XCTestCase {
    /// pg_ctl restart cuts every session: statements in flight fail with `connectionClosed`, the pool
    /// reconnects with backoff, later statements succeed, and the listener LISTENs again.
    func testReconnectAfterServerRestartAndListenerResubscribes() async throws {
        let postgres = try TestPostgres.shared()
        let test = try await TestClient(prefix: "reconnect") { $0.connectionsPerLoop = 2 }
        let client = test.client
        let loop = test.group.loops[0]

        let received = Mutex<[PostgresNotification]>([])
        let reconnected = Atomic<Int>(0)
        let listener = try await onLoop(loop) { () -> PostgresListener in
            let listener = PostgresListener(loop: loop, configuration: PostgresConfiguration(connectionString: test.connectionString)) { notification in
                received.withLock { $0.append(notification) }
            }
            listener.onReconnect = { reconnected.add(1, ordering: .relaxed) }
            listener.listen("restarts")
            listener.start()
            return listener
        }
        let listening = await eventually { (try? await onLoop(loop) { listener.isListening }) ?? false }
        XCTAssertTrue(listening)

        // Statements in flight when the server goes away.
        let inFlight = (0..<4).map { _ in
            Task { () -> PostgresError? in
                do throws(PostgresError) {
                    try await client.query("SELECT pg_sleep(30)")
                    return nil
                } catch {
                    return error
                }
            }
        }
        let allSent = await eventually { client.stats.queriesInFlight == 4 }
        XCTAssertTrue(allSent, "in flight: \(client.stats.queriesInFlight)")

        try postgres.restart()

        for task in inFlight {
            let error = await task.value
            guard case .connectionClosed(let reason)? = error else {
                XCTFail("expected connectionClosed, got \(String(describing: error))")
                continue
            }
            XCTAssertFalse(reason.isEmpty)
        }

        // Later statements succeed once the pool has reconnected (they wait for it).
        for i in 0..<20 {
            let rows = try await client.query("SELECT $1::int8 AS v", [.int(i)])
            XCTAssertEqual(rows.first?["v"].int, i)
        }
        let bothBack = await eventually { client.stats.connectionsOpen == 2 }
        XCTAssertTrue(bothBack, "\(client.stats)")
        XCTAssertGreaterThanOrEqual(client.stats.reconnects, 2)

        // The listener came back and LISTENs again.
        let resubscribed = await eventually { reconnected.load(ordering: .relaxed) >= 1 }
        XCTAssertTrue(resubscribed)
        try await client.notify(channel: "restarts", payload: "after restart")
        let delivered = await eventually { received.withLock { $0.contains { $0.payload == "after restart" } } }
        XCTAssertTrue(delivered)

        try await onLoop(loop) { listener.close() }
        await test.shutdown()
    }
}
