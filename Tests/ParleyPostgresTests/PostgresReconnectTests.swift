import ParleyNet
@testable import ParleyPostgres
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

        // The pool reconnects by itself (while reconnect attempts fail, statements fail at once:
        // see PostgresUnreachableTests); then statements succeed.
        let bothBack = await eventually { client.stats.connectionsOpen == 2 }
        XCTAssertTrue(bothBack, "\(client.stats)")
        for i in 0..<20 {
            let rows = try await client.query("SELECT $1::int8 AS v", [.int(i)])
            XCTAssertEqual(rows.first?["v"].int, i)
        }
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

/// PostgreSQL stopped under a running pool: once a reconnect attempt fails, statements fail at
/// once instead of waiting `waitTimeout`, and the pool recovers by itself when the server is back.
final class PostgresUnreachableTests: XCTestCase {
    func testStatementsFailFastWhileDatabaseIsDownAndPoolRecovers() async throws {
        let postgres = try TestPostgres.makePrivate()
        defer { postgres.remove() }
        let test = try await TestClient(prefix: "down", threads: 2, postgres: postgres) {
            $0.connectionsPerLoop = 2
            $0.reconnectMaxDelay = .milliseconds(300)
        }
        let client = test.client
        try await client.query("SELECT 1")
        XCTAssertEqual(client.stats.unreachablePools, 0)

        try postgres.cluster.stop(mode: .immediate)
        let clock = ContinuousClock()

        // Issued right after the crash: sent on a dead connection (connectionClosed) or queued
        // until the first failed reconnect, which fails the queue at once.
        let stoppedAt = clock.now
        let early = await withTaskGroup(of: PostgresError?.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    do throws(PostgresError) { try await client.query("SELECT 1"); return nil } catch { return error }
                }
            }
            return await group.reduce(into: [PostgresError?]()) { $0.append($1) }
        }
        XCTAssertLessThan(clock.now - stoppedAt, .seconds(2), "statements waited for the pool's wait timeout")
        for error in early {
            switch error {
            case .connectionClosed?, .connectionUnavailable?: break
            default: XCTFail("expected connectionClosed or connectionUnavailable, got \(String(describing: error))")
            }
        }
        let known = await eventually { client.stats.unreachablePools == 2 }
        XCTAssertTrue(known, "\(client.stats)")

        // Known unreachable: every kind of request fails at once with the pool's reason.
        let started = clock.now
        for _ in 0..<100 {
            do throws(PostgresError) {
                _ = try await client.read("SELECT 1")
                XCTFail("a read succeeded with PostgreSQL down")
            } catch {
                guard case .connectionUnavailable(let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("unreachable"), reason)
            }
        }
        do {
            _ = try await client.transaction { try await $0.query("SELECT 1") }
            XCTFail("a transaction began with PostgreSQL down")
        } catch let error as PostgresError {
            guard case .connectionUnavailable = error else { return XCTFail("\(error)") }
        }
        do throws(PostgresError) {
            try await client.ping(within: .seconds(5))
            XCTFail("ping succeeded with PostgreSQL down")
        } catch {
            guard case .connectionUnavailable = error else { return XCTFail("\(error)") }
        }
        XCTAssertLessThan(clock.now - started, .milliseconds(500))
        XCTAssertEqual(client.stats.waiters, 0)

        // Back: the pools' reconnect backoff finds it without any request.
        try postgres.cluster.start()
        let recovered = await eventually { client.stats.unreachablePools == 0 && client.stats.connectionsOpen == 4 }
        XCTAssertTrue(recovered, "\(client.stats)")
        try await client.query("CREATE TABLE t (v int)")
        try await client.transaction { try await $0.query("INSERT INTO t VALUES (2)") }
        let rows = try await client.read("SELECT count(*)::int8 AS n FROM t")
        XCTAssertEqual(rows.first?["n"].int, 1)
        await test.shutdown()
    }
    /// One loop's pool getting through again makes the others try at once instead of waiting out
    /// their (here 10–20 s) backoff.
    func testAPoolThatReconnectsWakesTheOtherLoopsPools() async throws {
        let postgres = try TestPostgres.makePrivate()
        defer { postgres.remove() }
        let test = try await TestClient(prefix: "wake", threads: 2, postgres: postgres) {
            $0.connectionsPerLoop = 1
            $0.reconnectBaseDelay = .seconds(10)
            $0.reconnectMaxDelay = .seconds(20)
        }
        let client = test.client
        try postgres.cluster.stop(mode: .immediate)
        let lost = await eventually { client.stats.connectionsOpen == 0 }
        XCTAssertTrue(lost, "\(client.stats)")
        for pool in client.pools { try await onLoop(pool.loop) { pool.reconnectNow() } }
        let known = await eventually { client.stats.unreachablePools == 2 }
        XCTAssertTrue(known, "\(client.stats)")

        try postgres.cluster.start()
        let clock = ContinuousClock()
        let started = clock.now
        let first = client.pools[0]
        try await onLoop(first.loop) { first.reconnectNow() }
        let both = await eventually(timeout: .seconds(5)) { client.stats.unreachablePools == 0 && client.stats.connectionsOpen == 2 }
        XCTAssertTrue(both, "\(client.stats)")
        XCTAssertLessThan(clock.now - started, .seconds(5))
        await test.shutdown()
    }
}


/// A server that accepts TCP connections and never answers (a hung or black-holed PostgreSQL).
final class PostgresSilentServerTests: XCTestCase {
    func testPingAnswersWithinItsTimeoutWhenTheServerIsSilent() async throws {
        let silent = try SilentServer()
        let group = try EventLoopGroup(threads: 1)
        let client = PostgresClient(group: group, configuration: PostgresConfiguration(
            connectionString: "host=127.0.0.1 port=\(silent.port) user=postgres dbname=postgres connect_timeout=30"))
        client.start()
        let clock = ContinuousClock()
        let started = clock.now
        do throws(PostgresError) {
            try await client.ping(within: .milliseconds(300))
            XCTFail("ping succeeded against a silent server")
        } catch {
            guard case .connectionUnavailable(let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("did not answer"), reason)
        }
        let elapsed = clock.now - started
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(300))
        XCTAssertLessThan(elapsed, .seconds(1))
        // Not known to be unreachable: the attempt is still under way, so statements wait.
        XCTAssertEqual(client.stats.unreachablePools, 0)
        await client.shutdown()
        group.shutdownGracefully()
    }
}
