import ParleyCalls
import ParleyJSON
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// A migrated database of the shared test cluster with a client on its own loop.
final class CallTestDatabase: Sendable {
    let group: EventLoopGroup
    let client: PostgresClient
    let connectionString: String

    init(prefix: String, threads: Int = 1) async throws {
        connectionString = try TestPostgres.shared().makeDatabase(prefix: prefix)
        guard let directory = Migrator.defaultDirectory() else { throw XCTSkip("no migrations directory") }
        try Migrator(connectionString: connectionString, directory: directory).migrate()
        group = try EventLoopGroup(threads: threads)
        client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: connectionString))
        client.start()
        try await client.waitUntilReady()
    }

    func addUser(_ objectId: String) async throws {
        try await client.query("INSERT INTO users (object_id, username) VALUES ($1, $2)", [.text(objectId), .text("user-\(objectId)")])
    }

    func shutdown() async {
        await client.shutdown()
        group.shutdownGracefully()
    }
}

final class CallStoreTests: XCTestCase {
    static func uuid(_ n: Int) -> String {
        let hex = String(n, radix: 16)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - hex.count) + hex
    }

    static func record(_ n: Int, from caller: String, to callee: String, startedAt: Int64) -> CallRecord {
        CallRecord(callId: uuid(n), caller: CallDevice(userId: caller, deviceId: "\(caller)-phone"), calleeId: callee, answerDevice: nil,
                   headers: JSONObject([("subject", .string("call \(n)"))]), state: .initiating, details: CallDetails(startedAt: startedAt, video: n % 2 == 0))
    }

    func testInsertUpdateFindRoundTrip() async throws {
        let database = try await CallTestDatabase(prefix: "calls_store")
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        var record = Self.record(1, from: "alice", to: "bob", startedAt: 1_700_000_000_123)
        let result1 = try await store.insert(record).inserted
        XCTAssertTrue(result1)
        let result2 = try await store.find(record.callId)
        XCTAssertEqual(result2, record)

        record.state = .ended
        record.answerDevice = "bob-tablet"
        record.details.progressedAt = 1_700_000_000_200
        record.details.rungAt = 1_700_000_000_900
        record.details.answeredAt = 1_700_000_004_000
        record.details.establishedAt = 1_700_000_004_500
        record.details.endedAt = 1_700_000_064_500
        record.details.endCause = .hungUp
        try await store.update(record)
        let found = try await store.find(record.callId.uppercased())
        XCTAssertEqual(found, record)
        XCTAssertEqual(found?.details.duration, 60_000)
        await database.shutdown()
    }

    func testInsertReadsTheCalleeDevicesWhenAsked() async throws {
        let database = try await CallTestDatabase(prefix: "calls_devices")
        try await database.addUser("bob")
        try await database.client.query("""
            INSERT INTO rt_devices (user_id, device_id) VALUES ('bob', 'tablet'), ('bob', 'phone "1"'), ('carol', 'phone')
            """)
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users", readsCalleeDevices: true)
        let toBob = try await store.insert(Self.record(1, from: "alice", to: "bob", startedAt: 1_000))
        XCTAssertEqual(toBob, CallStore.Insertion(inserted: true, calleeExists: true, calleeDevices: ["phone \"1\"", "tablet"]))
        let toNobody = try await store.insert(Self.record(2, from: "alice", to: "dave", startedAt: 1_000))
        XCTAssertEqual(toNobody, CallStore.Insertion(inserted: true, calleeExists: false, calleeDevices: []))
        let plain = try await CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users").insert(Self.record(3, from: "alice", to: "bob", startedAt: 1_000))
        XCTAssertNil(plain.calleeDevices, "read by the transport instead")
        _ = try await store.insert(Self.record(4, from: "alice", to: "bob", startedAt: 1_000), recordContact: true)
        _ = try await store.insert(Self.record(5, from: "alice", to: "dave", startedAt: 1_000), recordContact: true)
        let contacts = try await database.client.query("SELECT user_id || '>' || contact_id AS pair FROM rt_contacts ORDER BY 1")
        XCTAssertEqual(contacts.compactMap { $0["pair"].string }, ["alice>bob"], "the caller reached an existing callee")
        await database.shutdown()
    }

    func testDuplicateIdInAnyCaseIsRefused() async throws {
        let database = try await CallTestDatabase(prefix: "calls_dup")
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        var record = Self.record(0xABC, from: "alice", to: "bob", startedAt: 1_000)
        let result3 = try await store.insert(record).inserted
        XCTAssertTrue(result3)
        let result4 = try await store.insert(record).inserted
        XCTAssertFalse(result4)
        record.callId = record.callId.uppercased()
        let result5 = try await store.insert(record).inserted
        XCTAssertFalse(result5, "the same UUID in upper case is the same call")
        await database.shutdown()
    }

    func testFailureAndErrorAreStored() async throws {
        let database = try await CallTestDatabase(prefix: "calls_failure")
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        var record = Self.record(7, from: "alice", to: "nobody", startedAt: 5_000)
        record.state = .ended
        record.details.endedAt = 5_001
        record.details.endCause = .failure
        record.details.error = "user_not_found"
        let result6 = try await store.insert(record).inserted
        XCTAssertTrue(result6)
        let found = try await store.find(record.callId)
        XCTAssertEqual(found?.details.endCause, .failure)
        XCTAssertEqual(found?.details.error, "user_not_found")
        XCTAssertEqual(found?.json { $0.deviceId }["error"], "user_not_found")
        XCTAssertEqual(found?.json { $0.deviceId }["endedAt"], "1970-01-01T00:00:05.001Z")
        await database.shutdown()
    }

    func testHistoryListsBothDirectionsNewestFirstInPages() async throws {
        let database = try await CallTestDatabase(prefix: "calls_history")
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        // alice calls bob (even n) and bob calls alice (odd n); carol's calls are not alice's.
        for n in 1...9 {
            let record = n % 2 == 0 ? Self.record(n, from: "alice", to: "bob", startedAt: Int64(n) * 1_000)
                                    : Self.record(n, from: "bob", to: "alice", startedAt: Int64(n) * 1_000)
            let result7 = try await store.insert(record).inserted
            XCTAssertTrue(result7)
        }
        let result8 = try await store.insert(Self.record(100, from: "carol", to: "bob", startedAt: 50_000)).inserted
        XCTAssertTrue(result8)
        // Two calls started in the same millisecond keep a stable order (by id).
        let result9 = try await store.insert(Self.record(200, from: "alice", to: "carol", startedAt: 9_000)).inserted
        XCTAssertTrue(result9)

        let all = try await store.history(userId: "alice", limit: 50)
        XCTAssertEqual(all.map(\.callId), [Self.uuid(200), Self.uuid(9), Self.uuid(8), Self.uuid(7), Self.uuid(6), Self.uuid(5), Self.uuid(4), Self.uuid(3), Self.uuid(2), Self.uuid(1)])

        var pages: [[String]] = []
        var before: String?
        while true {
            let page = try await store.history(userId: "alice", before: before, limit: 4)
            if page.isEmpty { break }
            pages.append(page.map(\.callId))
            before = page.last?.callId
        }
        XCTAssertEqual(pages.map(\.count), [4, 4, 2])
        XCTAssertEqual(pages.flatMap { $0 }, all.map(\.callId))

        let result10 = try await store.history(userId: "carol", limit: 50).map(\.callId)
        XCTAssertEqual(result10, [Self.uuid(100), Self.uuid(200)])
        let result11 = try await store.history(userId: "dave", limit: 50)
        XCTAssertEqual(result11, [])
        // A cursor that is not one of the user's calls matches nothing.
        let result12 = try await store.history(userId: "dave", before: Self.uuid(9), limit: 50)
        XCTAssertEqual(result12, [])
        // The limit is clamped.
        let result13 = try await store.history(userId: "alice", limit: 0).count
        XCTAssertEqual(result13, 1)
        await database.shutdown()
    }

    func testUserExists() async throws {
        let database = try await CallTestDatabase(prefix: "calls_users")
        try await database.addUser("Ab12Cd34Ef")
        let store = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        let result14 = try await store.userExists("Ab12Cd34Ef")
        XCTAssertTrue(result14)
        let result15 = try await store.userExists("nobody")
        XCTAssertFalse(result15)
        let known = try await store.insert(Self.record(1, from: "alice", to: "Ab12Cd34Ef", startedAt: 1_000))
        XCTAssertEqual(known, CallStore.Insertion(inserted: true, calleeExists: true))
        let unknown = try await store.insert(Self.record(2, from: "alice", to: "nobody", startedAt: 1_000))
        XCTAssertEqual(unknown, CallStore.Insertion(inserted: true, calleeExists: false))
        let duplicate = try await store.insert(Self.record(2, from: "alice", to: "Ab12Cd34Ef", startedAt: 1_000))
        XCTAssertEqual(duplicate, CallStore.Insertion(inserted: false, calleeExists: true))
        await database.shutdown()
    }

    func testEndAbandonedClosesCallsOfStoppedNodesOnly() async throws {
        let database = try await CallTestDatabase(prefix: "calls_abandoned")
        let mine = CallStore(database: database.client, nodeId: "node-a", existingUsers: "accounts_existing_users")
        let other = CallStore(database: database.client, nodeId: "node-b", existingUsers: "accounts_existing_users")
        let stopped = CallStore(database: database.client, nodeId: "node-c", existingUsers: "accounts_existing_users")
        try await insertAll([
            (mine, Self.record(1, from: "alice", to: "bob", startedAt: 1_000)),
            (other, Self.record(2, from: "alice", to: "bob", startedAt: 2_000)),
            (stopped, Self.record(3, from: "alice", to: "bob", startedAt: 3_000)),
        ])
        var ended = Self.record(4, from: "alice", to: "bob", startedAt: 4_000)
        ended.state = .ended
        ended.details.endedAt = 4_500
        ended.details.endCause = .canceled
        try await insertAll([(stopped, ended)])

        let closed = try await mine.endAbandoned(liveNodes: ["node-b"])
        XCTAssertEqual(closed, 1)
        let ownCall = try await mine.find(Self.uuid(1))
        XCTAssertEqual(ownCall?.state, .initiating, "this node's calls are live in its memory")
        let otherCall = try await mine.find(Self.uuid(2))
        XCTAssertEqual(otherCall?.state, .initiating, "a call of a running node stays live")
        let abandoned = try await mine.find(Self.uuid(3))
        XCTAssertEqual(abandoned?.state, .ended)
        XCTAssertEqual(abandoned?.details.endCause, .failure)
        XCTAssertEqual(abandoned?.details.error, "server_restarted")
        XCTAssertNotNil(abandoned?.details.endedAt)
        let untouched = try await mine.find(Self.uuid(4))
        XCTAssertEqual(untouched?.details.endCause, .canceled, "an ended call is untouched")
        await database.shutdown()
    }

    func testLiveNodesAreTheRecentlyHeartbeatingOnes() async throws {
        let database = try await CallTestDatabase(prefix: "calls_nodes")
        try await database.client.query("INSERT INTO rt_nodes (node_id, heartbeat_at) VALUES ('fresh', now()), ('stale', now() - interval '10 minutes')")
        let store = CallStore(database: database.client, nodeId: "fresh", existingUsers: "accounts_existing_users")
        let live = try await store.liveNodes(staleAfter: .seconds(45))
        XCTAssertEqual(live, ["fresh"])
        await database.shutdown()
    }

    private func insertAll(_ rows: [(CallStore, CallRecord)], file: StaticString = #filePath, line: UInt = #line) async throws {
        for (store, record) in rows {
            let insertion = try await store.insert(record)
            XCTAssertTrue(insertion.inserted, record.callId, file: file, line: line)
        }
    }
}
