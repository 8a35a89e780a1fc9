import Foundation
import ParleyCalls
import ParleyJSON
import ParleyNet
import ParleyPostgres
import Synchronization
import XCTest

/// A call service on two real loops and a real database, with devices simulated by an
/// in-memory transport: device frames go in through `handle`, and every reply and event a
/// device gets is recorded in order.
final class CallHarness: Sendable {
    let database: CallTestDatabase
    let transport = InMemoryCallTransport()
    let service: CallService
    let store: CallStore

    static let alice = CallDevice(userId: "aliceAAAAA", deviceId: "alice-phone")
    static let aliceTablet = CallDevice(userId: "aliceAAAAA", deviceId: "alice-tablet")
    static let bobPhone = CallDevice(userId: "bobBBBBBBB", deviceId: "bob-phone")
    static let bobTablet = CallDevice(userId: "bobBBBBBBB", deviceId: "bob-tablet")
    static let carol = CallDevice(userId: "carolCCCCC", deviceId: "carol-phone")
    static let dave = CallDevice(userId: "daveDDDDDD", deviceId: "dave-phone")

    init(prefix: String, configuration: CallConfiguration) async throws {
        database = try await CallTestDatabase(prefix: prefix, threads: 2)
        for user in ["aliceAAAAA", "bobBBBBBBB", "carolCCCCC", "daveDDDDDD"] { try await database.addUser(user) }
        store = CallStore(database: database.client, nodeId: "test-node", existingUsers: "accounts_existing_users")
        service = CallService(group: database.group, store: store, transport: transport, configuration: configuration)
    }

    /// The loop a device's connection lives on: alice's on loop 0, everyone else's on loop 1,
    /// so calls cross loops.
    func loop(of device: CallDevice) -> EventLoop {
        database.group.loops[device.userId.hasPrefix("alice") ? 0 : 1 % database.group.loops.count]
    }

    /// Sends a frame from `device` (on its loop) and returns the reply, also recorded in the
    /// device's stream as `ok`/`error`.
    @discardableResult
    /// `via`: another service on the same loops (a restarted node), instead of the harness's.
    func send(_ device: CallDevice, _ type: String, _ fields: [(String, JSONValue)], via other: CallService? = nil) async -> Result<JSONObject, CallError> {
        let object = JSONObject([("type", .string(type))] + fields)
        let service = other ?? self.service, transport = self.transport
        return await withCheckedContinuation { continuation in
            loop(of: device).execute {
                service.handle(type: type, object: object, from: device) { result in
                    switch result {
                    case .success:
                        transport.record(JSONObject([("type", "ok"), ("re", .string(type))]), for: device)
                    case .failure(let error):
                        transport.record(JSONObject([("type", "error"), ("re", .string(type)), ("code", .string(error.code))]), for: device)
                    }
                    continuation.resume(returning: result)
                }
            }
        }
    }

    func invite(_ callId: String, from: CallDevice = alice, to: String = bobPhone.userId, video: Bool = false) async -> Result<JSONObject, CallError> {
        await send(from, "call.invite", [("callId", .string(callId)), ("to", .string(to)), ("video", .bool(video)), ("sdp", "v=0 offer"), ("headers", ["subject": "hello"])])
    }

    func shutdown() async {
        await database.shutdown()
    }
}

final class CallServiceTests: XCTestCase {
    typealias H = CallHarness

    static let fast = CallConfiguration(timeouts: CallTimeouts(reach: .milliseconds(400), ring: .milliseconds(500), grace: .milliseconds(400)), maxCallsPerUser: 1)

    static func newCallId() -> String { UUID().uuidString }

    static func code(_ result: Result<JSONObject, CallError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let error): error.code
        }
    }

    func expect(_ result: Result<JSONObject, CallError>, _ code: String, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(Self.code(result), code, message, file: file, line: line)
    }

    func expectPresent(_ value: Any?, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotNil(value, message, file: file, line: line)
    }

    func makeHarness(_ name: String, configuration: CallConfiguration = fast) async throws -> CallHarness {
        try await CallHarness(prefix: "calls_svc_\(name)", configuration: configuration)
    }

    /// Waits until the stored record of `callId` satisfies `condition`.
    func storedRecord(_ harness: CallHarness, _ callId: String, where condition: @escaping (CallRecord) -> Bool) async throws -> CallRecord? {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let record = try await harness.store.find(callId), condition(record) { return record }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try await harness.store.find(callId)
    }

    // MARK: A whole call

    func testRingBothAnswerOneRelayOnlyBetweenPartiesHangUp() async throws {
        let h = try await makeHarness("full", configuration: CallConfiguration(maxCallsPerUser: 1))
        h.transport.connect(H.alice)
        h.transport.connect(H.aliceTablet)
        h.transport.connect(H.bobPhone)
        h.transport.connect(H.bobTablet)
        let callId = Self.newCallId()

        let invited = await h.invite(callId, video: true)
        XCTAssertEqual(try invited.get()["callId"], .string(callId))
        let incomingPhone = await h.transport.waitFor(H.bobPhone, "call.incoming")
        let incomingTablet = await h.transport.waitFor(H.bobTablet, "call.incoming")
        XCTAssertEqual(incomingPhone?["from"], .string(H.alice.userId))
        XCTAssertEqual(incomingPhone?["video"], true)
        XCTAssertEqual(incomingPhone?["sdp"], "v=0 offer")
        XCTAssertEqual(incomingPhone?["headers"], ["subject": "hello"])
        XCTAssertNotNil(incomingPhone?["expiresAt"]?.string)
        XCTAssertEqual(incomingTablet?["callId"], .string(callId))
        let progress = await h.transport.waitFor(H.alice, "call.progress")
        XCTAssertNotNil(progress)
        XCTAssertEqual(h.transport.receivedTypes(H.alice).first, "ok", "the invite's ok comes before any call event")
        XCTAssertEqual(h.transport.receivedTypes(H.aliceTablet), [], "the caller's other devices see nothing")

        expect(await h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))]), "ok")
        expect(await h.send(H.bobTablet, "call.ringing", [("callId", .string(callId))]), "ok")
        let ringing = await h.transport.waitFor(H.alice, "call.ringing")
        XCTAssertNotNil(ringing)
        // Caller candidates before the answer wait for the answering device.
        expect(await h.send(H.alice, "call.candidates", [("callId", .string(callId)), ("candidates", [["candidate": "c-early"]])]), "ok")

        expect(await h.send(H.bobTablet, "call.answer", [("callId", .string(callId)), ("sdp", "v=0 answer")]), "ok")
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "v=0 late")]), "already_answered")
        let answered = await h.transport.waitFor(H.alice, "call.answered")
        XCTAssertEqual(answered?["sdp"], "v=0 answer")
        XCTAssertEqual(answered?["deviceId"], .string(h.transport.label(of: H.bobTablet)))
        let other = await h.transport.waitFor(H.bobPhone, "call.ended")
        XCTAssertEqual(other?["endCause"], "otherDeviceAnswered")
        let early = await h.transport.waitFor(H.bobTablet, "call.candidates")
        XCTAssertEqual(early?["candidates"], [["candidate": "c-early"]])

        // After the answer: relayed between the two parties only.
        expect(await h.send(H.alice, "call.candidates", [("callId", .string(callId)), ("candidates", [["candidate": "c-caller"]])]), "ok")
        expect(await h.send(H.bobTablet, "call.candidates", [("callId", .string(callId)), ("candidates", ["c-callee"])]), "ok")
        expect(await h.send(H.bobPhone, "call.candidates", [("callId", .string(callId)), ("candidates", ["c-intruder"])]), "not_a_party")
        expect(await h.send(H.aliceTablet, "call.candidates", [("callId", .string(callId)), ("candidates", ["c-intruder"])]), "not_a_party")
        let relayedToCallee = await h.transport.waitFor(H.bobTablet, "call.candidates", count: 2)
        XCTAssertEqual(relayedToCallee?["candidates"], [["candidate": "c-caller"]])
        let relayedToCaller = await h.transport.waitFor(H.alice, "call.candidates")
        XCTAssertEqual(relayedToCaller?["candidates"], ["c-callee"])
        XCTAssertFalse(h.transport.receivedTypes(H.bobPhone).contains("call.candidates"))
        XCTAssertFalse(h.transport.receivedTypes(H.aliceTablet).contains("call.candidates"))

        expect(await h.send(H.bobTablet, "call.negotiate", [("callId", .string(callId)), ("sdp", "v=0 re-offer"), ("kind", "offer")]), "ok")
        let negotiate = await h.transport.waitFor(H.alice, "call.negotiate")
        XCTAssertEqual(negotiate?["sdp"], "v=0 re-offer")
        XCTAssertEqual(negotiate?["kind"], "offer")

        expect(await h.send(H.alice, "call.established", [("callId", .string(callId))]), "ok")
        let establishedCaller = await h.transport.waitFor(H.alice, "call.established")
        let establishedCallee = await h.transport.waitFor(H.bobTablet, "call.established")
        XCTAssertNotNil(establishedCaller)
        XCTAssertNotNil(establishedCallee)

        // Kept: the established call lasts 30 ms, and its `duration` is checked below.
        try await Task.sleep(for: .milliseconds(30))
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")
        let endedCaller = await h.transport.waitFor(H.alice, "call.ended")
        let endedCallee = await h.transport.waitFor(H.bobTablet, "call.ended")
        for ended in [endedCaller, endedCallee] {
            XCTAssertEqual(ended?["endCause"], "hungUp")
            let details = ended?["details"]
            XCTAssertEqual(details?["endCause"], "hungUp")
            XCTAssertEqual(details?["video"], true)
            for field in ["startedAt", "progressedAt", "rungAt", "answeredAt", "establishedAt", "endedAt"] {
                XCTAssertNotNil(details?[field]?.string, field)
            }
            XCTAssertGreaterThanOrEqual(details?["duration"]?.int ?? -1, 25)
            XCTAssertNotNil(details?["setupDuration"]?.int)
            XCTAssertNotNil(details?["notifyingDuration"]?.int)
            XCTAssertNotNil(details?["ringingDuration"]?.int)
            XCTAssertEqual(details?["answeredDeviceId"], .string(h.transport.label(of: H.bobTablet)))
        }
        XCTAssertEqual(h.transport.received(H.bobPhone).filter { $0["type"]?.string == "call.ended" }.count, 1, "the other device is told once")
        expect(await h.send(H.bobTablet, "call.hangup", [("callId", .string(callId))]), "call_ended")

        let stored = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(stored?.details.endCause, .hungUp)
        XCTAssertEqual(stored?.answerDevice, H.bobTablet.deviceId)
        XCTAssertNotNil(stored?.details.establishedAt)
        XCTAssertEqual(h.service.liveCalls, 0)
        XCTAssertEqual(h.service.activeCalls(of: H.alice.userId), 0)
        XCTAssertEqual(h.service.activeCalls(of: H.bobPhone.userId), 0)
        await h.shutdown()
    }

    // MARK: End causes

    func testUnknownCalleeFailsAtOnce() async throws {
        let h = try await makeHarness("unknown")
        h.transport.connect(H.alice)
        let callId = Self.newCallId()
        let started = ContinuousClock.now
        expect(await h.invite(callId, to: "nobodyXXXX"), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1), "no timeout is waited for")
        XCTAssertEqual(ended?["endCause"], "failure")
        XCTAssertEqual(ended?["error"], "user_not_found")
        XCTAssertEqual(h.transport.receivedTypes(H.alice), ["ok", "call.ended"])
        let stored = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(stored?.details.error, "user_not_found")
        await h.shutdown()
    }

    /// An invite refused by the installed hooks: the callee's connected devices never ring, the
    /// caller gets `call.ended` with the refusal, the call is stored ended, and the hooks hear
    /// of the end. Invites the hooks let through ring as usual.
    func testHooksRefuseAnInviteBeforeTheCalleeRings() async throws {
        let h = try await makeHarness("hooks", configuration: CallConfiguration(maxCallsPerUser: 5))
        let hooks = RecordingCallHooks()
        h.service.install(hooks: hooks)
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId, to: H.bobPhone.userId), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended")
        XCTAssertEqual(ended?["endCause"], "denied")
        XCTAssertEqual(ended?["error"], "blocked by hook")
        XCTAssertEqual(h.transport.receivedTypes(H.bobPhone), [], "the callee never rings")
        let stored = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(stored?.details.endCause, .denied)
        XCTAssertEqual(hooks.reviewed, [callId])
        XCTAssertEqual(hooks.ended.first?["endCause"], "denied")
        XCTAssertEqual(h.service.liveCalls, 0)
        XCTAssertEqual(h.service.activeCalls(of: H.bobPhone.userId), 0)

        let allowed = Self.newCallId()
        hooks.refuse.withLock { $0 = false }
        expect(await h.invite(allowed, to: H.bobPhone.userId), "ok")
        let incoming = await h.transport.waitFor(H.bobPhone, "call.incoming")
        XCTAssertEqual(incoming?["callId"], .string(allowed))
        await h.shutdown()
    }

    /// A hang-up sent while the invite is reviewed waits for the review, then cancels the call.
    func testHangUpDuringReviewCancelsTheCall() async throws {
        let h = try await makeHarness("review-hangup", configuration: CallConfiguration(maxCallsPerUser: 5))
        let hooks = RecordingCallHooks()
        hooks.refuse.withLock { $0 = false }
        hooks.delay.withLock { $0 = .milliseconds(400) }
        h.service.install(hooks: hooks)
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        async let invited = h.invite(callId, to: H.bobPhone.userId)
        try await Task.sleep(for: .milliseconds(100))
        let hangup = await h.send(H.alice, "call.hangup", [("callId", .string(callId))])
        expect(await invited, "ok")
        expect(hangup, "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended")
        XCTAssertEqual(ended?["endCause"], "canceled")
        XCTAssertEqual(h.service.liveCalls, 0)
        await h.shutdown()
    }

    func testCanceledDeniedBusyAndDeclineWithBusy() async throws {
        let h = try await makeHarness("causes", configuration: CallConfiguration(maxCallsPerUser: 5))
        for device in [H.alice, H.bobPhone, H.bobTablet] { h.transport.connect(device) }
        let cases: [(String, CallDevice, [(String, JSONValue)], String)] = [
            ("canceled", H.alice, [], "canceled"),
            ("denied", H.bobPhone, [], "denied"),
            ("busy", H.bobTablet, [("reason", "busy")], "busy"),
        ]
        for (name, who, extra, cause) in cases {
            let callId = Self.newCallId()
            expect(await h.invite(callId), "ok", name)
            let incoming = await h.transport.waitFor(H.bobTablet) { $0["type"]?.string == "call.incoming" && $0["callId"]?.string == callId }
            XCTAssertNotNil(incoming, name)
            expect(await h.send(who, "call.hangup", [("callId", .string(callId))] + extra), "ok", name)
            for device in [H.alice, H.bobPhone, H.bobTablet] {
                let ended = await h.transport.waitFor(device) { $0["type"]?.string == "call.ended" && $0["callId"]?.string == callId }
                XCTAssertEqual(ended?["endCause"], .string(cause), "\(name) at \(device)")
            }
            let stored = try await storedRecord(h, callId) { $0.state == .ended }
            XCTAssertEqual(stored?.details.endCause?.rawValue, cause, name)
        }
        await h.shutdown()
    }

    func testTimeoutWhenNoCalleeDeviceIsReached() async throws {
        let h = try await makeHarness("timeout")
        h.transport.connect(H.alice)
        let callId = Self.newCallId()
        expect(await h.invite(callId, to: H.carol.userId), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended", timeout: .seconds(3))
        XCTAssertEqual(ended?["endCause"], "timeout")
        XCTAssertEqual(h.transport.receivedTypes(H.alice), ["ok", "call.ended"], "no progress: carol has no device")
        await h.shutdown()
    }

    func testNoAnswerAfterRinging() async throws {
        let h = try await makeHarness("noanswer")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming")
        let rangAt = ContinuousClock.now
        expect(await h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))]), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended", timeout: .seconds(3))
        XCTAssertEqual(ended?["endCause"], "noAnswer")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - rangAt, .milliseconds(450), "the ring timer, not the reach timer, ended it")
        let calleeEnded = await h.transport.waitFor(H.bobPhone, "call.ended")
        XCTAssertEqual(calleeEnded?["endCause"], "noAnswer")
        XCTAssertEqual(h.transport.receivedTypes(H.alice), ["ok", "call.progress", "call.ringing", "call.ended"])
        await h.shutdown()
    }

    func testCallerLostDuringRingingEndsInactiveForTheCallee() async throws {
        let h = try await makeHarness("lostringing")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming")
        await h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))])
        h.transport.disconnect(H.alice)
        h.service.deviceDisconnected(H.alice)
        let ended = await h.transport.waitFor(H.bobPhone, "call.ended", timeout: .milliseconds(300))
        XCTAssertEqual(ended?["endCause"], "inactive", "at once, not after a timer")
        // The caller's device learns it if it comes back within the grace period.
        let queued = await h.transport.waitForQueued(H.alice, "call.ended")
        XCTAssertEqual(queued?.event["endCause"], "inactive")
        await h.shutdown()
    }

    func testPartyLostMidCallEndsInactiveAfterGraceUnlessBack() async throws {
        let h = try await makeHarness("grace")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        // Back within grace: the call goes on.
        let kept = Self.newCallId()
        expect(await h.invite(kept), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming")
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(kept)), ("sdp", "a")]), "ok")
        h.transport.disconnect(H.bobPhone)
        h.service.deviceDisconnected(H.bobPhone)
        // Kept: 150 ms away, within the 400 ms grace period (the time tested).
        try await Task.sleep(for: .milliseconds(150))
        h.transport.connect(H.bobPhone)
        h.service.deviceConnected(H.bobPhone)
        // Kept: a window past the grace period in which the call must not end.
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertFalse(h.transport.receivedTypes(H.alice).contains("call.ended"))
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(kept))]), "ok")
        let hungUp = await h.transport.waitFor(H.bobPhone, "call.ended")
        XCTAssertEqual(hungUp?["endCause"], "hungUp")

        // Not back: inactive after the grace period, for the other side.
        let lost = Self.newCallId()
        expect(await h.invite(lost), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming", count: 2)
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(lost)), ("sdp", "a")]), "ok")
        expect(await h.send(H.bobPhone, "call.established", [("callId", .string(lost))]), "ok")
        let lostAt = ContinuousClock.now
        h.transport.disconnect(H.alice)
        h.service.deviceDisconnected(H.alice)
        let ended = await h.transport.waitFor(H.bobPhone, "call.ended", count: 2, timeout: .seconds(3))
        XCTAssertEqual(ended?["endCause"], "inactive")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - lostAt, .milliseconds(350))
        let stored = try await storedRecord(h, lost) { $0.state == .ended }
        XCTAssertEqual(stored?.details.endCause, .inactive)
        await h.shutdown()
    }

    /// The realtime layer reports closed connections only; a device that reconnected (and sent
    /// nothing since) is found connected when the grace period ends.
    func testPartyReconnectedSilentlyIsFoundAtTheEndOfGrace() async throws {
        let h = try await makeHarness("silent")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming")
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "a")]), "ok")
        h.transport.disconnect(H.alice)
        h.service.deviceDisconnected(H.alice)
        // Kept: 100 ms away, within the grace period (the time tested).
        try await Task.sleep(for: .milliseconds(100))
        h.transport.connect(H.alice)
        // Kept: a window past the grace period in which the call must not end.
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertFalse(h.transport.receivedTypes(H.bobPhone).contains("call.ended"))
        // Lost again later: a fresh grace period starts.
        h.transport.disconnect(H.alice)
        h.service.deviceDisconnected(H.alice)
        let ended = await h.transport.waitFor(H.bobPhone, "call.ended", timeout: .seconds(3))
        XCTAssertEqual(ended?["endCause"], "inactive")
        await h.shutdown()
    }

    func testConcurrentCallLimitMakesCalleeBusyAndRefusesCaller() async throws {
        let h = try await makeHarness("limit")
        for device in [H.alice, H.bobPhone, H.carol, H.dave] { h.transport.connect(device) }
        let first = Self.newCallId()
        expect(await h.invite(first), "ok")
        _ = await h.transport.waitFor(H.bobPhone, "call.incoming")
        // bob is in a call: carol's call to bob ends busy.
        let second = Self.newCallId()
        expect(await h.invite(second, from: H.carol, to: H.bobPhone.userId), "ok")
        let busy = await h.transport.waitFor(H.carol, "call.ended")
        XCTAssertEqual(busy?["endCause"], "busy")
        XCTAssertEqual(h.transport.received(H.bobPhone).filter { $0["type"]?.string == "call.incoming" }.count, 1, "bob is not disturbed")
        // alice is in a call: she cannot place another.
        expect(await h.invite(Self.newCallId(), to: H.dave.userId), "too_many_calls")
        // After the first call ends, both are free again.
        await h.send(H.alice, "call.hangup", [("callId", .string(first))])
        _ = await h.transport.waitFor(H.bobPhone, "call.ended")
        expect(await h.invite(Self.newCallId(), from: H.carol, to: H.bobPhone.userId), "ok")
        let incoming = await h.transport.waitFor(H.bobPhone, "call.incoming", count: 2)
        XCTAssertEqual(incoming?["from"], .string(H.carol.userId))
        await h.shutdown()
    }

    // MARK: Errors

    func testClearErrors() async throws {
        let h = try await makeHarness("errors", configuration: CallConfiguration(maxCallsPerUser: 3))
        for device in [H.alice, H.bobPhone, H.carol] { h.transport.connect(device) }
        expect(await h.invite(Self.newCallId(), to: H.alice.userId), "cannot_call_self")
        expect(await h.send(H.alice, "call.invite", [("callId", "not-a-uuid"), ("to", .string(H.bobPhone.userId)), ("sdp", "x")]), "bad_request")
        expect(await h.send(H.alice, "call.invite", [("callId", .string(Self.newCallId())), ("to", .string(H.bobPhone.userId))]), "bad_request")
        expect(await h.send(H.alice, "call.invite", [("callId", .string(Self.newCallId())), ("to", .string(H.bobPhone.userId)), ("sdp", .string(String(repeating: "a", count: 70_000)))]), "bad_request")

        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        expect(await h.invite(callId), "call_exists", "a second invite with the same callId")
        expect(await h.invite(callId.lowercased(), from: H.carol, to: H.bobPhone.userId), "call_exists", "the id in another case")
        expect(await h.send(H.carol, "call.answer", [("callId", .string(callId)), ("sdp", "a")]), "not_callee", "an answer from a device of another user")
        expect(await h.send(H.alice, "call.answer", [("callId", .string(callId)), ("sdp", "a")]), "not_callee", "the caller cannot answer")
        expect(await h.send(H.bobPhone, "call.negotiate", [("callId", .string(callId)), ("sdp", "a"), ("kind", "offer")]), "not_answered")
        expect(await h.send(H.bobPhone, "call.negotiate", [("callId", .string(callId)), ("sdp", "a"), ("kind", "pranswer")]), "bad_request")
        expect(await h.send(H.bobPhone, "call.hangup", [("callId", .string(callId)), ("reason", "whatever")]), "bad_request")
        expect(await h.send(H.bobPhone, "call.ringing", [("callId", .string(Self.newCallId()))]), "call_not_found")

        expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")
        for (type, fields) in [("call.ringing", [(String, JSONValue)]()), ("call.answer", [("sdp", "a")]), ("call.candidates", [("candidates", ["c"])]), ("call.hangup", [])] {
            expect(await h.send(H.bobPhone, type, [("callId", .string(callId))] + fields), "call_ended", type)
        }
        expect(await h.invite(callId), "call_exists", "an ended call's id is not reused")
        await h.shutdown()
    }

    func testEndedCallIsKnownFromTheDatabaseAfterRestart() async throws {
        let h = try await makeHarness("restart")
        h.transport.connect(H.alice)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        await h.send(H.alice, "call.hangup", [("callId", .string(callId))])
        _ = try await storedRecord(h, callId) { $0.state == .ended }
        // A fresh service (a restarted node) has no memory of the call.
        let fresh = CallService(group: h.database.group, store: h.store, transport: h.transport, configuration: Self.fast)
        let result = await h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))], via: fresh)
        XCTAssertEqual(Self.code(result), "call_ended")
        let stranger = await h.send(H.carol, "call.ringing", [("callId", .string(callId))], via: fresh)
        XCTAssertEqual(Self.code(stranger), "call_not_found", "a stranger learns nothing about the call")
        let invite = await h.send(H.alice, "call.invite", [("callId", .string(callId)), ("to", .string(H.bobPhone.userId)), ("sdp", "x")], via: fresh)
        XCTAssertEqual(Self.code(invite), "call_exists")
        XCTAssertEqual(fresh.liveCalls, 0)
        await h.shutdown()
    }

    /// A call whose owner node stopped heartbeating is closed as failure/node_lost by a live
    /// node's sweep, and its parties get `call.ended` through their queues.
    func testCallsOfALostNodeEndAndTheirPartiesAreTold() async throws {
        let h = try await makeHarness("nodelost")
        h.transport.addOfflineDevice(H.alice)
        h.transport.addOfflineDevice(H.bobPhone)
        h.transport.addOfflineDevice(H.bobTablet)
        let lost = CallStore(database: h.database.client, nodeId: "lost-node", existingUsers: "accounts_existing_users")
        let answered = Self.newCallId(), ringing = Self.newCallId()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var machine = CallStateMachine(callId: answered, caller: H.alice, calleeId: H.bobPhone.userId, video: false,
                                       timeouts: Self.fast.timeouts, now: now)
        _ = machine.start()
        _ = try machine.handle(CallEvent.offered(deviceCount: 2), now: now)
        _ = try machine.handle(CallEvent.answer(from: H.bobTablet, sdp: "a"), now: now)
        _ = try await lost.insert(CallRecord(machine, headers: JSONObject()))
        var other = CallStateMachine(callId: ringing, caller: H.alice, calleeId: H.bobPhone.userId, video: false,
                                     timeouts: Self.fast.timeouts, now: now)
        _ = other.start()
        _ = try await lost.insert(CallRecord(other, headers: JSONObject()))

        let closed = await h.service.endAbandonedCalls(nodeStaleAfter: .seconds(60))
        XCTAssertGreaterThanOrEqual(closed, 2)
        for callId in [answered, ringing] {
            let record = try await h.store.find(callId)
            XCTAssertEqual(record?.state, .ended)
            XCTAssertEqual(record?.details.endCause, .failure)
            XCTAssertEqual(record?.details.error, "node_lost")
        }
        func endings(_ device: CallDevice, _ callId: String) -> [JSONObject] {
            h.transport.queued(device).map(\.event).filter { $0["type"]?.string == "call.ended" && $0["callId"]?.string == callId }
        }
        XCTAssertEqual(endings(H.alice, answered).first?["error"], "node_lost")
        XCTAssertEqual(endings(H.alice, answered).first?["endCause"], "failure")
        XCTAssertEqual(endings(H.bobTablet, answered).count, 1, "the answering device is told")
        XCTAssertEqual(endings(H.bobPhone, answered).count, 0, "the device that did not answer is not")
        XCTAssertEqual(endings(H.alice, ringing).count, 1)
        XCTAssertEqual(endings(H.bobPhone, ringing).count, 1, "every callee device of an unanswered call is told")
        XCTAssertEqual(endings(H.bobTablet, ringing).count, 1)
        await h.shutdown()
    }

    /// The row is not rewritten at the answer; a call still live `answerRecordDelay` later gets
    /// its answering device written, so a node-loss sweep can tell only that device.
    func testAnsweredCallIsRecordedAfterTheDelayNotAtTheAnswer() async throws {
        let h = try await makeHarness("answerrecord")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "a")]), "ok")
        let answeredAt = ContinuousClock.now
        // The insert may still be in flight (the callee rang here, so the call did not wait for
        // it): the first row seen is the invite's.
        let early = try await storedRecord(h, callId) { _ in true }
        XCTAssertLessThan(ContinuousClock.now - answeredAt, CallService.answerRecordDelay)
        XCTAssertEqual(early?.state, .initiating, "no write at the answer")
        XCTAssertNil(early?.answerDevice)
        let stored = try await storedRecord(h, callId) { $0.state == .answered }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - answeredAt, CallService.answerRecordDelay)
        XCTAssertEqual(stored?.answerDevice, H.bobPhone.deviceId)
        XCTAssertNotNil(stored?.details.answeredAt)
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")
        let ended = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(ended?.details.endCause, .hungUp)
        await h.shutdown()
    }

    /// A callee connected here rings before the call is stored; its frames that arrive before
    /// the row is written wait for it instead of failing.
    func testCalleeAnsweringBeforeTheCallIsStoredIsHeld() async throws {
        let h = try await makeHarness("held")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        for _ in 0..<5 {
            let callId = Self.newCallId()
            async let invited = h.invite(callId)
            let incoming = await h.transport.waitFor(H.bobPhone, timeout: .seconds(5)) { $0["type"]?.string == "call.incoming" && $0["callId"]?.string == callId }
            XCTAssertNotNil(incoming)
            async let rang = h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))])
            async let answered = h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "a")])
            expect(await invited, "ok")
            expect(await rang, "ok")
            expect(await answered, "ok")
            let event = await h.transport.waitFor(H.alice) { $0["type"]?.string == "call.answered" && $0["callId"]?.string == callId }
            XCTAssertEqual(event?["deviceId"], .string(h.transport.label(of: H.bobPhone)))
            expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")
            _ = await h.transport.waitFor(H.bobPhone) { $0["type"]?.string == "call.ended" && $0["callId"]?.string == callId }
        }
        await h.shutdown()
    }

    /// An id that only the database knows (an earlier run), for a call that already rang a
    /// callee connection here: the caller had its `ok`, so the call ends for both sides with
    /// `failure`/`call_exists`, and the earlier call's row is left as it was.
    func testDuplicateFoundOnlyInTheDatabaseEndsTheEarlyRing() async throws {
        let h = try await makeHarness("lateduplicate")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")
        let earlier = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(earlier?.details.endCause, .canceled)
        let fresh = CallService(group: h.database.group, store: h.store, transport: h.transport, configuration: Self.fast)
        let invite = await h.send(H.alice, "call.invite", [("callId", .string(callId)), ("to", .string(H.bobPhone.userId)), ("sdp", "x")], via: fresh)
        expect(invite, "ok", "the callee rang before the insert found the id")
        for device in [H.alice, H.bobPhone] {
            let ended = await h.transport.waitFor(device) {
                $0["type"]?.string == "call.ended" && $0["callId"]?.string == callId && $0["error"]?.string == "call_exists"
            }
            XCTAssertEqual(ended?["endCause"], "failure", "\(device.deviceId)")
        }
        XCTAssertEqual(fresh.activeCalls(of: H.bobPhone.userId), 0)
        XCTAssertEqual(fresh.activeCalls(of: H.alice.userId), 0)
        // Kept: a window in which a late write of the duplicate must not happen.
        try await Task.sleep(for: .milliseconds(200))
        let after = try await h.store.find(callId)
        XCTAssertEqual(after, earlier, "the earlier call's row is not overwritten")
        await h.shutdown()
    }

    /// With a callee connection here, no step of the setup waits for the database: while the
    /// insert is blocked (a lock on the table), the caller gets `ok`, the callee rings and
    /// answers, and the caller gets `call.answered`. The callee's device that is not connected
    /// is offered the call through its queue only if the call is still unanswered when the
    /// insert has read the devices; and the end is written after the insert.
    func testSetupWithACalleeConnectedHereDoesNotWaitForTheInsert() async throws {
        let h = try await makeHarness("noinsertwait")
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        h.transport.addOfflineDevice(H.bobTablet)
        let locker = PostgresClient(group: h.database.group, configuration: PostgresConfiguration(connectionString: h.database.connectionString))
        locker.start()
        try await locker.waitUntilReady()
        let locked = AsyncStream<Void>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await locker.transaction { transaction in
                _ = try await transaction.query("LOCK TABLE calls IN SHARE ROW EXCLUSIVE MODE")
                locked.continuation.yield()
                // Released by the test, or after 5 s (so a server that waits for the insert fails
                // the test instead of hanging it).
                let timeout = Task {
                    try? await Task.sleep(for: .seconds(5))
                    release.continuation.yield()
                }
                for await _ in release.stream { break }
                timeout.cancel()
            }
        }
        for await _ in locked.stream { break }

        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        let incoming = await h.transport.waitFor(H.bobPhone, "call.incoming")
        XCTAssertNotNil(incoming)
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "v=0 answer")]), "ok")
        let answered = await h.transport.waitFor(H.alice) { $0["type"]?.string == "call.answered" && $0["callId"]?.string == callId }
        XCTAssertEqual(answered?["deviceId"], .string(h.transport.label(of: H.bobPhone)))
        let unstored = try await h.store.find(callId)
        XCTAssertNil(unstored, "the insert is still blocked")
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(callId))]), "ok")

        release.continuation.yield()
        _ = try await holder.value
        let record = try await storedRecord(h, callId) { $0.state == .ended }
        XCTAssertEqual(record?.details.endCause, .hungUp)
        XCTAssertEqual(record?.answerDevice, H.bobPhone.deviceId)
        XCTAssertFalse(h.transport.queued(H.bobTablet).contains { $0.event["callId"]?.string == callId },
                       "a call answered before the devices were read is not offered to the others")

        // Unanswered when the insert has read the devices: the device not connected gets it queued.
        let second = Self.newCallId()
        expect(await h.invite(second), "ok")
        let queued = await h.transport.waitForQueued(H.bobTablet, "call.incoming")
        XCTAssertEqual(queued?.event["callId"], .string(second))
        expect(await h.send(H.alice, "call.hangup", [("callId", .string(second))]), "ok")
        await locker.shutdown()
        await h.shutdown()
    }

    // MARK: Offline callees

    func testOfflineCalleeDeviceGetsIncomingQueuedWithTheCallLifetime() async throws {
        let h = try await makeHarness("offline")
        h.transport.connect(H.alice)
        h.transport.addOfflineDevice(H.bobPhone)
        h.transport.connect(H.bobTablet)
        let callId = Self.newCallId()
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        expect(await h.invite(callId), "ok")
        let queued = await h.transport.waitForQueued(H.bobPhone, "call.incoming")
        XCTAssertEqual(queued?.event["callId"], .string(callId))
        let lifetime = Self.fast.timeouts.reach.components.seconds * 1000 + Self.fast.timeouts.reach.components.attoseconds / 1_000_000_000_000_000
            + Self.fast.timeouts.ring.components.seconds * 1000 + Self.fast.timeouts.ring.components.attoseconds / 1_000_000_000_000_000
        XCTAssertEqual(Double(queued?.expiresAt ?? 0), Double(before + lifetime), accuracy: 200)
        let live = await h.transport.waitFor(H.bobTablet, "call.incoming")
        XCTAssertNotNil(live)
        XCTAssertNil(live?["seq"], "a device connected here gets it live")
        XCTAssertEqual(h.transport.queued(H.bobTablet), [], "…and not through its queue")
        // The call ends before the phone connects: it learns that too when it does.
        await h.send(H.alice, "call.hangup", [("callId", .string(callId))])
        let ended = await h.transport.waitForQueued(H.bobPhone, "call.ended")
        XCTAssertEqual(ended?.event["endCause"], "canceled")
        XCTAssertEqual(ended?.expiresAt, queued?.expiresAt)
        // In that order: the end never overtakes the invite in a device's queue.
        XCTAssertEqual(h.transport.queued(H.bobPhone).compactMap { $0.event["type"]?.string }, ["call.incoming", "call.ended"])
        let liveEnd = await h.transport.waitFor(H.bobTablet, "call.ended")
        XCTAssertEqual(liveEnd?["endCause"], "canceled")
        XCTAssertEqual(h.transport.queued(H.bobTablet), [], "the live device learns the end live")
        await h.shutdown()
    }

    func testOnlyOfflineDevicesStillProgressAndCanAnswerAfterConnecting() async throws {
        let h = try await makeHarness("offline_answer")
        h.transport.connect(H.alice)
        h.transport.addOfflineDevice(H.bobPhone)
        let callId = Self.newCallId()
        expect(await h.invite(callId), "ok")
        expectPresent(await h.transport.waitFor(H.alice, "call.progress"), "a queued (pushed) invite counts as progress")
        // The device wakes up, connects, rings and answers.
        h.transport.connect(H.bobPhone)
        expect(await h.send(H.bobPhone, "call.ringing", [("callId", .string(callId))]), "ok")
        expect(await h.send(H.bobPhone, "call.answer", [("callId", .string(callId)), ("sdp", "a")]), "ok")
        expectPresent(await h.transport.waitFor(H.alice, "call.answered"))
        await h.shutdown()
    }

    func testDeviceListFailureFailsTheCallOnlyWhenNobodyRang() async throws {
        let h = try await makeHarness("devicesfail")
        h.transport.connect(H.alice)
        h.transport.addOfflineDevice(H.bobPhone)
        h.transport.setDeviceListFails(true)
        let unreached = Self.newCallId()
        expect(await h.invite(unreached), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended")
        XCTAssertEqual(ended?["endCause"], "failure")
        XCTAssertEqual(ended?["error"], "unavailable")
        XCTAssertEqual(h.transport.queued(H.bobPhone), [])
        // A callee connected here rang anyway: the call goes on.
        h.transport.connect(H.bobTablet)
        let reached = Self.newCallId()
        expect(await h.invite(reached), "ok")
        expectPresent(await h.transport.waitFor(H.bobTablet, "call.incoming"))
        expectPresent(await h.transport.waitFor(H.alice, "call.progress"))
        expect(await h.send(H.bobTablet, "call.answer", [("callId", .string(reached)), ("sdp", "a")]), "ok")
        expectPresent(await h.transport.waitFor(H.alice, "call.answered"))
        await h.shutdown()
    }

    func testQueueFailureWithNoLiveDeviceFailsTheCall() async throws {
        let h = try await makeHarness("queuefail")
        h.transport.connect(H.alice)
        h.transport.addOfflineDevice(H.bobPhone)
        h.transport.setQueueingFails(true)
        expect(await h.invite(Self.newCallId()), "ok")
        let ended = await h.transport.waitFor(H.alice, "call.ended")
        XCTAssertEqual(ended?["endCause"], "failure")
        XCTAssertEqual(ended?["error"], "unavailable")
        await h.shutdown()
    }

    // MARK: REST

    func testHistoryAndTurn() async throws {
        let turn = TURNConfiguration(uris: ["turn:127.0.0.1:3478"], secret: "s3cret", ttl: .seconds(600))
        let h = try await makeHarness("history", configuration: CallConfiguration(maxCallsPerUser: 5, turn: turn))
        h.transport.connect(H.alice)
        h.transport.connect(H.bobPhone)
        var ids: [String] = []
        for _ in 0..<3 {
            let callId = Self.newCallId()
            ids.append(callId)
            expect(await h.invite(callId), "ok")
            await h.send(H.bobPhone, "call.hangup", [("callId", .string(callId))])
            _ = try await storedRecord(h, callId) { $0.state == .ended }
            // Kept: calls started in distinct milliseconds, so the history order is defined.
            try await Task.sleep(for: .milliseconds(5))
        }
        let aliceHistory = try await h.service.history(userId: H.alice.userId, before: nil, limit: 2)
        XCTAssertEqual(aliceHistory["results"]?.array?.compactMap { $0["callId"]?.string }, [ids[2], ids[1]])
        let next = try await h.service.history(userId: H.alice.userId, before: ids[1], limit: 2)
        XCTAssertEqual(next["results"]?.array?.compactMap { $0["callId"]?.string }, [ids[0]])
        let bobHistory = try await h.service.history(userId: H.bobPhone.userId, before: nil, limit: 10)
        XCTAssertEqual(bobHistory["results"]?[0]?["endCause"], "denied")
        XCTAssertEqual(bobHistory["results"]?[0]?["from"], .string(H.alice.userId))
        do {
            _ = try await h.service.history(userId: H.alice.userId, before: "nope", limit: 2)
            XCTFail("a bad cursor is refused")
        } catch {
            XCTAssertEqual(error.code, "bad_request")
        }

        let credentials = h.service.turnCredentials(for: H.alice.userId)
        XCTAssertEqual(credentials["uris"], ["turn:127.0.0.1:3478"])
        XCTAssertEqual(credentials["ttl"], 600)
        let username = credentials["username"]?.string ?? ""
        XCTAssertTrue(username.hasSuffix(":\(H.alice.userId)"))
        XCTAssertEqual(credentials["password"]?.string, TURNCredentials.password(username: username, secret: "s3cret"))
        let disabled = CallService(group: h.database.group, store: h.store, transport: h.transport, configuration: CallConfiguration())
        XCTAssertEqual(disabled.turnCredentials(for: H.alice.userId), .object(JSONObject()))
        await h.shutdown()
    }
}

/// Refuses every invite (while `refuse`) and records what it saw.
final class RecordingCallHooks: CallHooks {
    let refuse = Mutex(true)
    let delay = Mutex<Duration>(.zero)
    private let state = Mutex<(reviewed: [String], ended: [JSONObject])>(([], []))

    var reviewed: [String] { state.withLock { $0.reviewed } }
    var ended: [JSONObject] { state.withLock { $0.ended } }

    func mustReview(caller: String, callee: String) -> Bool { true }

    func review(_ invite: CallInviteReview) async -> CallRefusal? {
        state.withLock { $0.reviewed.append(invite.callId) }
        let delay = delay.withLock { $0 }
        if delay > .zero { try? await Task.sleep(for: delay) }
        return refuse.withLock { $0 } ? CallRefusal(cause: .denied, error: "blocked by hook") : nil
    }

    func callEnded(_ details: JSONObject) {
        state.withLock { $0.ended.append(details) }
    }
}
