import Foundation
import ParleyJSON
import ParleyKit
import XCTest

/// What the SDK does when the server says no: a bad session, a second connection of the
/// device, a flood past the rate limit, another user's call.
final class AbuseTests: XCTestCase {
    func testABadSessionAndAReplacedDeviceStopWithTypedErrors() async throws {
        let harness = try SDKHarness()
        let alice = try harness.signUp("alice")
        let (stranger, strangerLog) = harness.client("stranger-device")
        await stranger.setDelegate(strangerLog)
        try await stranger.connect(sessionToken: "r:00000000000000000000000000000000")
        do {
            try await stranger.waitUntilConnected(timeout: .seconds(20))
            XCTFail("an invalid session must not connect")
        } catch {
            XCTAssertEqual(error, .invalidSession)
        }
        let state = await stranger.connectionState
        XCTAssertEqual(state, .stopped(.invalidSession))

        let (first, firstLog) = harness.client("alice-phone")
        try await harness.connect(first, firstLog, as: alice)
        let (second, secondLog) = harness.client("alice-phone-copy") { $0.deviceId = "alice-phone" }
        try await harness.connect(second, secondLog, as: alice)
        let replaced = await firstLog.waitUntil { $0.states.last == .stopped(.replaced) }
        XCTAssertTrue(replaced, "the older connection of the device is told it was replaced, and does not reconnect")
        let stillConnected = await second.connectionState
        XCTAssertEqual(stillConnected, .connected(userId: alice.id))
        for client in [stranger, first, second] { await client.shutdown() }
    }

    func testAFloodPastTheServersRateLimitIsRetriedAndDeliveredExactlyOnce() async throws {
        // The server's own limits (100/s sustained, burst 200): the SDK gets rate_limited and
        // sends those messages again later, with their clientMessageIds.
        let harness = try SDKHarness(serverArguments: ["--realtime-send-rate", "100", "--realtime-send-burst", "50"])
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (sender, senderLog) = harness.client("alice-phone") { $0.sendRetryMilliseconds = 200 }
        let (receiver, receiverLog) = harness.client("bob-phone")
        try await harness.connect(sender, senderLog, as: alice)
        try await harness.connect(receiver, receiverLog, as: bob)
        let total = 150
        for index in 0..<total { try await sender.send(OutgoingMessage(to: [bob.id], text: "f\(index)")) }
        let sent = await senderLog.waitUntil(timeout: .seconds(30)) { $0.sent.count == total }
        XCTAssertTrue(sent)
        let failures = await senderLog.sent.values.filter { (try? $0.get()) == nil }.count
        XCTAssertEqual(failures, 0)
        let received = await receiverLog.waitUntil(timeout: .seconds(30)) { $0.messages.count >= total }
        XCTAssertTrue(received)
        let texts = await receiverLog.messageTexts
        XCTAssertEqual(texts.count, total)
        XCTAssertEqual(Set(texts).count, total, "each once")
        await sender.shutdown()
        await receiver.shutdown()
    }

    func testAnotherUsersCallCannotBeAnsweredOrEnded() async throws {
        let harness = try SDKHarness()
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let mallory = try harness.signUp("mallory")
        let (caller, callerLog) = harness.client("alice-phone")
        let (callee, calleeLog) = harness.client("bob-phone")
        let (intruder, intruderLog) = harness.client("mallory-phone")
        try await harness.connect(caller, callerLog, as: alice)
        try await harness.connect(callee, calleeLog, as: bob)
        try await harness.connect(intruder, intruderLog, as: mallory)
        let call = try await caller.callUser(withId: bob.id, sdp: "v=0")
        // The codes of docs/realtime-protocol.md for a stranger on the call's own node.
        for (type, expected) in [("call.answer", "not_callee"), ("call.hangup", "not_a_party"), ("call.candidates", "not_a_party")] {
            do {
                _ = try await intruder.request(type: type, fields: ["callId": .string(call.callId), "sdp": "v=0", "candidates": ["c"]])
                XCTFail("\(type) from a stranger must fail")
            } catch .server(let code, _) {
                XCTAssertEqual(code, expected, type)
            }
        }
        do {
            _ = try await intruder.request(type: "call.answer", fields: ["callId": "not-a-uuid", "sdp": "v=0"])
            XCTFail("a malformed call id must fail")
        } catch .server(let code, _) {
            XCTAssertEqual(code, "bad_request")
        }
        XCTAssertNotEqual(call.state, .ended, "the call is untouched")
        try await call.hangup()
        for client in [caller, callee, intruder] { await client.shutdown() }
    }
}
