import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import Synchronization
import XCTest

final class PostgresListenerTests: XCTestCase {
    func testListenNotifyRoundTripAndUnlisten() async throws {
        let test = try await TestClient(prefix: "listen", threads: 2)
        let loop = test.group.loops[1]
        let received = Mutex<[PostgresNotification]>([])
        let onRightLoop = Atomic<Bool>(true)
        let listener = try await onLoop(loop) { () -> PostgresListener in
            let listener = PostgresListener(loop: loop, configuration: PostgresConfiguration(connectionString: test.connectionString)) { notification in
                if !loop.inEventLoop { onRightLoop.store(false, ordering: .relaxed) }
                received.withLock { $0.append(notification) }
            }
            listener.start()
            listener.listen("chat.events")
            listener.listen("Other Channel")
            return listener
        }
        let listening = await eventually { (try? await onLoop(loop) { listener.isListening }) ?? false }
        XCTAssertTrue(listening)

        try await test.client.notify(channel: "chat.events", payload: "héllo 👋 'quoted'")
        try await test.client.notify(channel: "Other Channel", payload: "{\"a\":1}")
        try await test.client.notify(channel: "not-listened", payload: "ignored")
        let both = await eventually { received.withLock { $0.count >= 2 } }
        XCTAssertTrue(both)
        let first = received.withLock { $0 }
        XCTAssertEqual(first.map(\.channel), ["chat.events", "Other Channel"])
        XCTAssertEqual(first.first?.payload, "héllo 👋 'quoted'")
        XCTAssertEqual(first.last?.payload, "{\"a\":1}")
        XCTAssertTrue(onRightLoop.load(ordering: .relaxed))

        try await onLoop(loop) { listener.unlisten("chat.events") }
        // Wait until the listener's backend has run the UNLISTEN (its last statement, now idle); a marker on the
        // kept channel then proves that a notification sent after it would have arrived.
        let unlistened = await eventually {
            let rows = try? await test.client.query("""
                SELECT count(*) AS n FROM pg_stat_activity WHERE query = 'UNLISTEN "chat.events"' AND state = 'idle'
                """)
            return rows?.first?["n"].int == 1
        }
        XCTAssertTrue(unlistened, "the UNLISTEN ran")
        try await test.client.notify(channel: "chat.events", payload: "after unlisten")
        try await test.client.notify(channel: "Other Channel", payload: "marker")
        let marker = await eventually { received.withLock { $0.contains { $0.payload == "marker" } } }
        XCTAssertTrue(marker)
        XCTAssertFalse(received.withLock { $0.contains { $0.payload == "after unlisten" } })

        try await onLoop(loop) { listener.close() }
        await test.shutdown()
    }
}
