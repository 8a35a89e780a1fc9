import Foundation
import ParleyCalls
import ParleyJSON
import XCTest

/// Two call services on one database, as two nodes: frames of a device on node B reach the call
/// owned by node A, A's events reach it, and a silent owner gives `unavailable`.
final class CallNodeRoutingTests: XCTestCase {
    typealias H = CallHarness

    static let configuration = CallConfiguration(timeouts: CallTimeouts(reach: .seconds(10), ring: .seconds(10), grace: .milliseconds(400)),
                                                 maxCallsPerUser: 2)

    struct Node {
        let transport: InMemoryCallTransport
        let service: CallService
    }

    static func node(_ id: String, _ database: CallTestDatabase) -> Node {
        let transport = InMemoryCallTransport(nodeId: id)
        let store = CallStore(database: database.client, nodeId: id, existingUsers: "accounts_existing_users")
        return Node(transport: transport, service: CallService(group: database.group, store: store, transport: transport,
                                                                configuration: Self.configuration))
    }

    /// Alice on node A calls Bob, whose phone on node B answers and then loses its connection.
    static func callAnsweredOnNodeBThenLost(_ prefix: String) async throws -> (CallTestDatabase, Node, Node, [(String, JSONValue)]) {
        let database = try await CallTestDatabase(prefix: prefix, threads: 2)
        for user in [H.alice.userId, H.bobPhone.userId] { try await database.addUser(user) }
        let a = Self.node("node-a", database), b = Self.node("node-b", database)
        a.transport.link("node-b", transport: b.transport, service: b.service)
        b.transport.link("node-a", transport: a.transport, service: a.service)
        a.transport.connect(H.alice)
        a.transport.addOfflineDevice(H.bobPhone)
        b.transport.connect(H.bobPhone)
        let id: [(String, JSONValue)] = [("callId", .string(CallServiceTests.newCallId()))]
        Self.expect(await Self.send(a, H.alice, "call.invite", id + [("to", .string(H.bobPhone.userId)), ("sdp", "offer")]), "ok")
        Self.expect(await Self.send(b, H.bobPhone, "call.answer", id + [("sdp", "answer")]), "ok")
        b.transport.disconnect(H.bobPhone)
        b.service.deviceDisconnected(H.bobPhone)
        return (database, a, b, id)
    }

    static func send(_ node: Node, _ device: CallDevice, _ type: String, _ fields: [(String, JSONValue)]) async -> Result<JSONObject, CallError> {
        let object = JSONObject([("type", .string(type))] + fields)
        return await withCheckedContinuation { continuation in
            node.service.handle(type: type, object: object, from: device) { continuation.resume(returning: $0) }
        }
    }

    static func expect(_ result: Result<JSONObject, CallError>, _ expected: String, _ message: String = "",
                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(code(result), expected, message, file: file, line: line)
    }

    static func expectSome<T>(_ value: T?, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotNil(value, message, file: file, line: line)
    }

    static func code(_ result: Result<JSONObject, CallError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let error): error.code
        }
    }

    func testFramesFromAnotherNodeReachTheOwnerAndItsEventsComeBack() async throws {
        let database = try await CallTestDatabase(prefix: "nodes", threads: 2)
        for user in [H.alice.userId, H.bobPhone.userId, H.carol.userId] { try await database.addUser(user) }
        let a = Self.node("node-a", database), b = Self.node("node-b", database)
        a.transport.link("node-b", transport: b.transport, service: b.service)
        b.transport.link("node-a", transport: a.transport, service: a.service)
        a.transport.connect(H.alice)
        a.transport.connect(H.bobTablet)
        a.transport.addOfflineDevice(H.bobPhone)
        b.transport.connect(H.bobPhone)
        b.transport.connect(H.carol)
        let callId = CallServiceTests.newCallId()
        let id: [(String, JSONValue)] = [("callId", .string(callId))]

        Self.expect(await Self.send(a, H.alice, "call.invite", id + [("to", .string(H.bobPhone.userId)), ("sdp", "offer")]), "ok")
        Self.expectSome(await a.transport.waitFor(H.bobTablet) { $0["type"]?.string == "call.incoming" })
        Self.expectSome(await a.transport.waitForQueued(H.bobPhone, "call.incoming"), "the device on node B is offered it through the queue")
        Self.expect(await Self.send(b, H.bobPhone, "call.ringing", id), "ok")
        Self.expectSome(await a.transport.waitFor(H.alice) { $0["type"]?.string == "call.ringing" })
        Self.expect(await Self.send(b, H.bobPhone, "call.answer", id + [("sdp", "answer")]), "ok")
        let answered = await a.transport.waitFor(H.alice) { $0["type"]?.string == "call.answered" }
        XCTAssertEqual(answered?["deviceId"], .string(a.transport.label(of: H.bobPhone)), "the answering device's label, not its id")
        Self.expect(await Self.send(a, H.bobTablet, "call.answer", id + [("sdp", "late")]), "already_answered")
        Self.expectSome(await a.transport.waitFor(H.bobTablet) { $0["type"]?.string == "call.ended" && $0["endCause"]?.string == "otherDeviceAnswered" })

        Self.expect(await Self.send(a, H.alice, "call.candidates", id + [("candidates", ["from-alice"])]), "ok")
        let relayed = await b.transport.waitFor(H.bobPhone) { $0["type"]?.string == "call.candidates" }
        XCTAssertEqual(relayed?["candidates"], ["from-alice"], "relayed to the answering device's node")
        Self.expect(await Self.send(b, H.bobPhone, "call.candidates", id + [("candidates", ["from-bob"])]), "ok")
        let forwarded = await a.transport.waitFor(H.alice) { $0["type"]?.string == "call.candidates" }
        XCTAssertEqual(forwarded?["candidates"], ["from-bob"])
        Self.expect(await Self.send(b, H.carol, "call.candidates", id + [("candidates", ["x"])]), "call_not_found",
                       "a stranger on node B learns nothing")
        XCTAssertFalse(a.transport.received(H.bobTablet).contains { $0["type"]?.string == "call.candidates" })

        Self.expect(await Self.send(b, H.bobPhone, "call.hangup", id), "ok")
        let ended = await a.transport.waitFor(H.alice) { $0["type"]?.string == "call.ended" }
        XCTAssertEqual(ended?["endCause"], "hungUp")
        let queuedEnd = await a.transport.waitForQueued(H.bobPhone, "call.ended")
        XCTAssertEqual(queuedEnd?.event["endCause"], "hungUp", "call.ended reaches the device on node B through its queue")
        Self.expect(await Self.send(b, H.bobPhone, "call.hangup", id), "call_ended")
        XCTAssertEqual(a.service.liveCalls, 0)
        XCTAssertEqual(b.service.liveCalls, 0)
        await database.shutdown()
    }

    func testAnsweringDeviceLostOnAnotherNodeEndsTheCallInactive() async throws {
        let (database, a, b, id) = try await Self.callAnsweredOnNodeBThenLost("nodeslost")
        let ended = await a.transport.waitFor(H.alice, timeout: .seconds(5)) { $0["type"]?.string == "call.ended" }
        XCTAssertEqual(ended?["endCause"], "inactive")
        await database.shutdown()
    }

    /// A party's device that connects to its node again within the grace period, without
    /// sending any call frame, keeps the call owned by another node.
    func testAnsweringDeviceBackOnAnotherNodeKeepsTheCall() async throws {
        let (database, a, b, id) = try await Self.callAnsweredOnNodeBThenLost("nodesback")
        // Kept: 100 ms away, within the grace period (the time tested).
        try await Task.sleep(for: .milliseconds(100))
        b.transport.connect(H.bobPhone)
        b.service.deviceConnected(H.bobPhone)
        let ended = await a.transport.waitFor(H.alice, timeout: .milliseconds(900)) { $0["type"]?.string == "call.ended" }
        XCTAssertNil(ended, "the call outlives the grace period")
        Self.expect(await Self.send(a, H.alice, "call.candidates", id + [("candidates", ["after"])]), "ok")
        let relayed = await b.transport.waitFor(H.bobPhone) { $0["type"]?.string == "call.candidates" }
        XCTAssertEqual(relayed?["candidates"], ["after"])
        Self.expect(await Self.send(a, H.alice, "call.hangup", id), "ok")
        await database.shutdown()
    }

    func testSilentOwnerNodeGivesUnavailable() async throws {
        let database = try await CallTestDatabase(prefix: "nodessilent", threads: 2)
        for user in [H.alice.userId, H.bobPhone.userId] { try await database.addUser(user) }
        // Node B does not reach node A: what it forwards there is lost, as to a stopped node.
        let a = Self.node("node-a", database), b = Self.node("node-b", database)
        a.transport.connect(H.alice)
        b.transport.connect(H.bobPhone)
        let callId = CallServiceTests.newCallId()
        let id: [(String, JSONValue)] = [("callId", .string(callId))]
        Self.expect(await Self.send(a, H.alice, "call.invite", id + [("to", .string(H.bobPhone.userId)), ("sdp", "offer")]), "ok")
        let started = ContinuousClock.now
        Self.expect(await Self.send(b, H.bobPhone, "call.ringing", id), "unavailable")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .seconds(4))
        await database.shutdown()
    }
}
