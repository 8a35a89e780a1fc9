import Foundation
import ParleyJSON
import ParleyKit
import XCTest

/// Calls between two SDK clients against a real server, through every end cause.
final class CallTests: XCTestCase {
    static let fastTimers = ["--call-reach-timeout", "2s", "--call-ring-timeout", "2s", "--call-grace-period", "1s"]

    func testAnsweredCallCarriesSDPAndCandidatesAndEndsHungUpOnBothSides() async throws {
        let harness = try SDKHarness(serverArguments: Self.fastTimers)
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (caller, callerLog) = harness.client("alice-phone")
        let (phone, phoneLog) = harness.client("bob-phone")
        let (tablet, tabletLog) = harness.client("bob-tablet")
        let callerMedia = RecordingMedia(offer: "v=0 alice-offer")
        let tabletMedia = RecordingMedia(offer: "unused")
        await caller.setMediaSession(callerMedia)
        await tablet.setMediaSession(tabletMedia)
        try await harness.connect(caller, callerLog, as: alice)
        try await harness.connect(phone, phoneLog, as: bob)
        try await harness.connect(tablet, tabletLog, as: bob)

        let call = try await caller.callUser(withId: bob.id, headers: ["topic": "lunch"], video: true)
        XCTAssertEqual(call.direction, .outgoing)
        XCTAssertEqual(caller.calls.call(uuid: call.uuid)?.callId, call.callId, "the registry maps the CallKit UUID")
        let outgoing = CallWatcher(call)
        let rang = await outgoing.wait(for: .ringing)
        XCTAssertTrue(rang, "both of Bob's devices said call.ringing on their own")

        let bothRinging = await phoneLog.waitUntil { $0.incomingCalls.count == 1 }
        let tabletRinging = await tabletLog.waitUntil { $0.incomingCalls.count == 1 }
        XCTAssertTrue(bothRinging && tabletRinging)
        let onPhone = await phoneLog.incomingCalls[0]
        let onTablet = await tabletLog.incomingCalls[0]
        XCTAssertEqual(onTablet.callId.lowercased(), call.callId.lowercased())
        XCTAssertEqual(onTablet.remoteUserId, alice.id)
        XCTAssertEqual(onTablet.video, true)
        XCTAssertEqual(onTablet.headers["topic"]?.string, "lunch")
        XCTAssertEqual(onTablet.remoteOffer, "v=0 alice-offer")
        XCTAssertTrue(tabletMedia.remote.contains { $0 == ("v=0 alice-offer", .offer) })
        let phoneWatcher = CallWatcher(onPhone)
        let tabletWatcher = CallWatcher(onTablet)

        // The tablet answers: the phone stops ringing, the caller gets the answer SDP.
        try await onTablet.answer(sdp: "v=0 bob-answer")
        let phoneEnd = await phoneWatcher.waitForEnd()
        XCTAssertEqual(phoneEnd, .otherDeviceAnswered)
        let answered = await outgoing.wait(for: .answered)
        XCTAssertTrue(answered)
        // The server names the answering device by an opaque per-user label, never its id.
        let label = try XCTUnwrap(call.answeredDeviceId)
        XCTAssertNotEqual(label, "bob-tablet")
        XCTAssertEqual(label.utf8.count, 24)
        XCTAssertTrue(label.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }, label)
        XCTAssertTrue(callerMedia.remote.contains { $0 == ("v=0 bob-answer", .answer) })

        // Candidates both ways, then media is up.
        try await call.sendCandidates(["candidate:1 1 udp 2122260223 10.0.0.1 40000 typ host", ["sdpMid": "0", "candidate": "c2"]])
        try await onTablet.sendCandidates(["candidate:9 1 udp 1 10.0.0.2 50000 typ host"])
        let tabletGotCandidates = await tabletWatcher.wait(timeout: .seconds(10)) { events in
            events.contains { if case .remoteCandidates(let list) = $0 { list.count == 2 } else { false } }
        }
        XCTAssertTrue(tabletGotCandidates)
        let callerGotCandidates = await outgoing.wait(timeout: .seconds(10)) { events in
            events.contains { if case .remoteCandidates = $0 { true } else { false } }
        }
        XCTAssertTrue(callerGotCandidates)
        XCTAssertEqual(callerMedia.candidates, ["candidate:9 1 udp 1 10.0.0.2 50000 typ host"])
        try await call.renegotiate(sdp: "v=0 alice-reoffer", kind: .offer)
        let reoffered = await tabletWatcher.wait(timeout: .seconds(10)) { $0.contains(.remoteDescription(sdp: "v=0 alice-reoffer", kind: .offer)) }
        XCTAssertTrue(reoffered)
        try await call.reportEstablished()
        let established = await tabletWatcher.wait(for: .established)
        XCTAssertTrue(established)

        try await onTablet.hangup()
        let callerEnd = await outgoing.waitForEnd()
        let tabletEnd = await tabletWatcher.waitForEnd()
        XCTAssertEqual(callerEnd, .hungUp)
        XCTAssertEqual(tabletEnd, .hungUp)
        XCTAssertEqual(call.details?.answeredDeviceId, label)
        XCTAssertNotNil(call.details?.duration)
        let callerStates = await outgoing.states
        XCTAssertEqual(callerStates, [.progressing, .ringing, .answered, .established, .ended])
        XCTAssertNil(caller.calls.call(id: call.callId), "ended calls leave the registry")
        XCTAssertEqual(callerMedia.closed, 1)

        // The call is in both users' history.
        // The end is recorded after it is signalled: wait for the row (bounded), not a fixed time.
        var history = try await caller.rest().callHistory(limit: 10)
        for _ in 0..<100 where history.first?.endCause == nil {
            try await Task.sleep(for: .milliseconds(50))
            history = try await caller.rest().callHistory(limit: 10)
        }
        XCTAssertEqual(history.first?.callId.lowercased(), call.callId.lowercased())
        XCTAssertEqual(history.first?.endCause, .hungUp)
        for client in [caller, phone, tablet] { await client.shutdown() }
    }

    func testUnansweredCallsEndWithCanceledDeniedBusyNoAnswerTimeoutAndFailure() async throws {
        let harness = try SDKHarness(serverArguments: Self.fastTimers)
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let carol = try harness.signUp("carol")
        let (caller, callerLog) = harness.client("alice-phone")
        let (callee, calleeLog) = harness.client("bob-phone")
        try await harness.connect(caller, callerLog, as: alice)
        try await harness.connect(callee, calleeLog, as: bob)
        // Carol has a device that is offline: her calls reach no one.
        let (carolPhone, carolLog) = harness.client("carol-phone")
        try await harness.connect(carolPhone, carolLog, as: carol)
        await carolPhone.shutdown()

        /// Places a call to Bob, lets `act` run on Bob's side once it rings, and returns both end causes.
        func place(to user: String, _ act: @escaping (Call) async throws -> Void) async throws -> (CallEndCause?, CallEndCause?, Call) {
            let before = await calleeLog.incomingCalls.count
            let call = try await caller.callUser(withId: user, sdp: "v=0 offer")
            let watcher = CallWatcher(call)
            guard user == bob.id else { return (await watcher.waitForEnd(), nil, call) }
            _ = await calleeLog.waitUntil { $0.incomingCalls.count > before }
            let incoming = await calleeLog.incomingCalls[before]
            let incomingWatcher = CallWatcher(incoming)
            _ = await watcher.wait(for: .ringing)
            try await act(incoming)
            return (await watcher.waitForEnd(), await incomingWatcher.waitForEnd(), call)
        }

        let canceled = try await place(to: bob.id) { _ in
            let outgoing = caller.calls.liveCalls.first { $0.direction == .outgoing }
            try await outgoing?.hangup()
        }
        XCTAssertEqual(canceled.0, .canceled)
        XCTAssertEqual(canceled.1, .canceled)

        let denied = try await place(to: bob.id) { try await $0.decline() }
        XCTAssertEqual(denied.0, .denied)
        XCTAssertEqual(denied.1, .denied)

        let busy = try await place(to: bob.id) { try await $0.decline(busy: true) }
        XCTAssertEqual(busy.0, .busy)
        XCTAssertEqual(busy.1, .busy)

        let noAnswer = try await place(to: bob.id) { _ in }
        XCTAssertEqual(noAnswer.0, .noAnswer)
        XCTAssertEqual(noAnswer.1, .noAnswer)

        let timeout = try await place(to: carol.id) { _ in }
        XCTAssertEqual(timeout.0, .timeout)

        let failure = try await place(to: "nobody0000") { _ in }
        XCTAssertEqual(failure.0, .failure)
        XCTAssertEqual(failure.2.error, "user_not_found")

        // Abuse: a call to oneself is refused at once, with the server's code.
        do {
            _ = try await caller.callUser(withId: alice.id, sdp: "v=0")
            XCTFail("calling oneself must fail")
        } catch .server(let code, _) {
            XCTAssertEqual(code, "cannot_call_self")
        }
        for client in [caller, callee] { await client.shutdown() }
    }

    func testAPartyThatVanishesAfterTheAnswerEndsTheCallAsInactive() async throws {
        let harness = try SDKHarness(serverArguments: Self.fastTimers)
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (caller, callerLog) = harness.client("alice-phone")
        let (callee, calleeLog) = harness.client("bob-phone")
        try await harness.connect(caller, callerLog, as: alice)
        try await harness.connect(callee, calleeLog, as: bob)
        let call = try await caller.callUser(withId: bob.id, sdp: "v=0 offer")
        let watcher = CallWatcher(call)
        _ = await calleeLog.waitUntil { $0.incomingCalls.count == 1 }
        let incoming = await calleeLog.incomingCalls[0]
        try await incoming.answer(sdp: "v=0 answer")
        _ = await watcher.wait(for: .answered)
        await callee.shutdown()
        let end = await watcher.waitForEnd()
        XCTAssertEqual(end, .inactive)
        await caller.shutdown()
    }

    /// Carol is offline; the call reaches her as a VoIP push through a real gateway stand-in.
    /// Her app decodes it, reports it (state `initiating`) and answers before the socket is up;
    /// once connected, the replayed `call.incoming` completes the call and the answer goes out.
    func testACallReportedFromAVoIPPushIsJoinedWhenTheSocketConnects() async throws {
        let sink = try PushGatewaySink()
        let harness = try SDKHarness(serverArguments: ["--push-gateway-url", "http://127.0.0.1:\(sink.port)",
                                                       "--push-bundle-id", "com.example.chat", "--push-poll-interval", "200ms"])
        let alice = try harness.signUp("alice")
        let carol = try harness.signUp("carol")
        let install = try TestHTTPClientShim.post(port: harness.port, "/parse/installations", token: carol.token,
                                                  json: "{\"installationId\":\"carol-phone\",\"deviceType\":\"ios\",\"voipDeviceToken\":\"carol-voip\"}")
        XCTAssertEqual(install, 201)
        let (caller, callerLog) = harness.client("alice-phone")
        try await harness.connect(caller, callerLog, as: alice)
        let call = try await caller.callUser(withId: carol.id, headers: ["name": "Alice"], sdp: "v=0 alice-offer")
        let watcher = CallWatcher(call)
        let progressed = await watcher.wait(for: .progressing)
        XCTAssertTrue(progressed, "the call was queued for Carol's offline device")

        // The gateway got the VoIP push; the app receives its data keys beside "aps".
        let deadline = Date().addingTimeInterval(20)
        while sink.received.isEmpty && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let notification = try XCTUnwrap(sink.received.first)
        XCTAssertEqual(notification["push_type"] as? String, "voip")
        var apns = try XCTUnwrap(notification["data"] as? [String: Any])
        apns["aps"] = [String: Any]()
        let text = String(decoding: try JSONSerialization.data(withJSONObject: apns), as: UTF8.self)
        let payload = try XCTUnwrap(VoIPPushPayload(jsonText: text))
        XCTAssertEqual(payload.callId.lowercased(), call.callId.lowercased())
        XCTAssertEqual(payload.from, alice.id)
        XCTAssertEqual(payload.headers["name"]?.string, "Alice")
        XCTAssertFalse(payload.isExpired())

        let (carolPhone, carolLog) = harness.client("carol-phone")
        await carolPhone.setDelegate(carolLog)
        let reported = carolPhone.incomingCall(fromPush: payload)
        XCTAssertEqual(reported.state, .initiating)
        XCTAssertEqual(reported.uuid, payload.uuid)
        XCTAssertEqual(carolPhone.calls.call(uuid: payload.uuid)?.callId, payload.callId)
        let reportedWatcher = CallWatcher(reported)
        // The user taps "answer" in the system UI before the socket is connected.
        let answering = Task { try await reported.answer(sdp: "v=0 carol-answer") }
        try await carolPhone.connect(sessionToken: carol.token)
        try await answering.value
        XCTAssertEqual(reported.remoteOffer, "v=0 alice-offer")
        let answered = await watcher.wait(for: .answered)
        XCTAssertTrue(answered)
        let incomingCount = await carolLog.incomingCalls.count
        XCTAssertEqual(incomingCount, 0, "the pushed call is the same Call, not a second incoming one")
        try await call.hangup()
        let carolEnd = await reportedWatcher.waitForEnd()
        XCTAssertEqual(carolEnd, .hungUp)
        let states = await reportedWatcher.states.filter { $0 != .ringing }
        XCTAssertEqual(states, [.progressing, .answered, .ended], "ringing may come before or after the answer")
        await carolPhone.shutdown()
        await caller.shutdown()
    }
}

import ParleyTestSupport

enum TestHTTPClientShim {
    /// POSTs JSON with a session token and returns the status.
    static func post(port: Int, _ path: String, token: String, json: String) throws -> Int {
        try TestHTTPClient(port: port).request(
            "POST", path, headers: [("X-Parse-Application-Id", "parley"), ("X-Parse-Session-Token", token), ("Content-Type", "application/json")],
            json: json).status
    }
}
