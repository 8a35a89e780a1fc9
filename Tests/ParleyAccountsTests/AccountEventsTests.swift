import ParleyAccounts
import ParleyJSON
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import Synchronization
import XCTest

final class AccountEventsTests: XCTestCase {
    func testBanOnOneNodeRevokesCachedSessionsOnAnotherAndTellsObservers() async throws {
        let h = try await AccountsHarness(prefix: "events")
        // A second "node": its own client, caches and LISTEN connection on the same database.
        let otherGroup = try EventLoopGroup(threads: 1)
        let otherPool = try BlockingPool(threads: 1)
        let otherClient = PostgresClient(group: otherGroup, configuration: PostgresConfiguration(connectionString: h.connectionString))
        otherClient.start()
        try await otherClient.waitUntilReady()
        let other = Accounts(database: otherClient, blockingPool: otherPool,
                             configuration: AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192, sessionCacheTTLSeconds: 3600))
        let seen = Mutex<[AccountEvent]>([])
        other.events.observe { event in seen.withLock { $0.append(event) } }
        other.events.startListening(on: otherGroup.loops[0], configuration: otherClient.configuration)

        let alice = try await h.signUp("alice")
        let token = alice.session!.token
        // The other node caches the session; probe until its LISTEN connection receives events.
        _ = try await other.sessions.lookup(token, on: otherClient)
        let probeDeadline = ContinuousClock.now + .seconds(20)
        while !seen.withLock({ $0.contains(.userChanged(userId: "probe")) }) && ContinuousClock.now < probeDeadline {
            _ = try await h.client.query("SELECT pg_notify($1, $2)", [.text(AccountEvents.channel), .text(#"{"event":"userChanged","user":"probe"}"#)])
            try await Task.sleep(for: .milliseconds(50))
        }
        seen.withLock { $0.removeAll() }

        try await h.accounts.users.setBanned(objectId: alice.objectId, banned: true, on: h.client)
        let deadline = ContinuousClock.now + .seconds(20)
        while !seen.withLock({ $0.contains { if case .sessionsRevoked = $0 { true } else { false } } }) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(seen.withLock { $0.filter { $0 != .userChanged(userId: "probe") } }, [.sessionsRevoked(userId: alice.objectId, reason: .banned, keeping: nil)])
        await XCTAssertParseError(209) { try await other.sessions.lookup(token, on: otherClient) }

        other.events.stopListening()
        await otherClient.shutdown()
        otherPool.shutdown()
        otherGroup.shutdownGracefully()
        await h.shutdown()
    }

    func testLogoutPublishesTheTokenAndMalformedPayloadsAreIgnored() async throws {
        let h = try await AccountsHarness(prefix: "events2")
        let seen = Mutex<[AccountEvent]>([])
        h.accounts.events.observe { event in seen.withLock { $0.append(event) } }
        let bob = try await h.signUp("bob")
        try await h.accounts.sessions.revoke(token: bob.session!.token, on: h.client)
        _ = try await h.accounts.users.update(objectId: bob.objectId, body: ["age": 3], auth: .master, on: h.client)
        XCTAssertEqual(seen.withLock { $0 }, [.sessionRevoked(token: bob.session!.token, userId: bob.objectId), .userChanged(userId: bob.objectId)])
        h.accounts.events.apply(payload: "not json")
        h.accounts.events.apply(payload: "{\"event\":\"unknown\",\"user\":\"x\"}")
        XCTAssertEqual(seen.withLock { $0.count }, 2)
        await h.shutdown()
    }
}

final class AccountEventsListeningTests: XCTestCase {
    func testUntilANodeListensItServesNoSessionFromMemory() async throws {
        let h = try await AccountsHarness(prefix: "events3")
        let alice = try await h.signUp("alice")
        XCTAssertNotNil(h.accounts.sessions.cache.get(alice.session!.token), "a node that does not listen trusts its cache (single node)")
        // A LISTEN connection that never comes up: events from other nodes may be missed.
        var unreachable = h.client.configuration
        unreachable.connectionString = "postgresql://127.0.0.1:\(FreePort.next())/nowhere?connect_timeout=1"
        h.accounts.events.startListening(on: h.group.loops[0], configuration: unreachable)
        XCTAssertFalse(h.accounts.sessions.cache.isTrusted)
        XCTAssertNil(h.accounts.sessions.cache.get(alice.session!.token), "what was cached is dropped")
        let session = try await h.accounts.sessions.lookup(alice.session!.token, on: h.client)
        XCTAssertEqual(session.userId, alice.objectId, "lookups still work, from PostgreSQL")
        XCTAssertNil(h.accounts.sessions.cache.get(alice.session!.token), "and are not kept")
        h.accounts.events.stopListening()
        await h.shutdown()
    }
}
