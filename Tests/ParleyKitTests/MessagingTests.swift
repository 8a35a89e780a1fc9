import Foundation
import ParleyJSON
import ParleyKit
import ParleyKitLinux
import XCTest

/// ParleyKit against a real server: messages, receipts, resume after offline, restarts.
final class MessagingTests: XCTestCase {
    func testTwoUsersThreeDevicesExchangeMessagesAndAnOfflineDeviceResumesTheUnackedTail() async throws {
        let harness = try SDKHarness()
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (alicePhone, alicePhoneLog) = harness.client("alice-phone")
        let (aliceTablet, aliceTabletLog) = harness.client("alice-tablet")
        let (bobPhone, bobPhoneLog) = harness.client("bob-phone")
        try await harness.connect(alicePhone, alicePhoneLog, as: alice)
        try await harness.connect(aliceTablet, aliceTabletLog, as: alice)
        try await harness.connect(bobPhone, bobPhoneLog, as: bob)

        let first = try await alicePhone.sendAndWait(OutgoingMessage(to: [bob.id], text: "hello bob", headers: ["kind": "chat"]))
        XCTAssertFalse(first.messageId.isEmpty)
        XCTAssertFalse(first.duplicate)
        let reply = try await bobPhone.sendAndWait(OutgoingMessage(to: [alice.id], text: "hi alice"))
        // Bob's phone gets Alice's message; Alice's tablet gets her own message and Bob's reply.
        let bobGot = await bobPhoneLog.waitUntil { $0.messageTexts == ["hello bob"] }
        XCTAssertTrue(bobGot)
        let tabletGot = await aliceTabletLog.waitUntil { $0.messageTexts == ["hello bob", "hi alice"] }
        let tabletTexts = await aliceTabletLog.messageTexts
        XCTAssertTrue(tabletGot, "\(tabletTexts)")
        let phoneGot = await alicePhoneLog.waitUntil { $0.messageTexts == ["hi alice"] }
        XCTAssertTrue(phoneGot, "the sending device does not get its own message back")
        let headers = await bobPhoneLog.messages.first?.headers
        XCTAssertEqual(headers?["kind"]?.string, "chat")
        // Bob's acknowledgement comes back to both of Alice's devices as a delivered receipt.
        let delivered = await alicePhoneLog.waitUntil { $0.receipts.contains { $0.messageId == first.messageId && $0.kind == .delivered } }
        XCTAssertTrue(delivered)
        try await bobPhone.markRead([first.messageId])
        let read = await aliceTabletLog.waitUntil { $0.receipts.contains { $0.messageId == first.messageId && $0.kind == .read } }
        XCTAssertTrue(read)

        // Bob's tablet (a second device) is offline while Alice sends ten messages; when it
        // comes online it gets exactly the tail it never acknowledged, in order, once.
        let (bobTablet, bobTabletLog) = harness.client("bob-tablet")
        try await harness.connect(bobTablet, bobTabletLog, as: bob)
        await bobTablet.disconnect()
        for index in 0..<10 { try await alicePhone.send(OutgoingMessage(to: [bob.id], text: "tail \(index)")) }
        let allSent = await alicePhoneLog.waitUntil { $0.sent.count == 11 }
        XCTAssertTrue(allSent)
        let (bobTabletAgain, bobTabletAgainLog) = harness.client("bob-tablet")
        try await harness.connect(bobTabletAgain, bobTabletAgainLog, as: bob)
        let tail = (0..<10).map { "tail \($0)" }
        let resumed = await bobTabletAgainLog.waitUntil { $0.messageTexts == tail }
        let resumedTexts = await bobTabletAgainLog.messageTexts
        XCTAssertTrue(resumed, "\(resumedTexts)")
        XCTAssertEqual(reply.failed, [])

        // History over REST pages the conversation newest first. (Ids made in the same
        // millisecond are not ordered among themselves by the server, so only the split into
        // pages and the order by `sentAt` are checked, not the order within one millisecond.)
        let rest = try await bobPhone.rest()
        let page = try await rest.history(with: alice.id, limit: 5)
        let next = try await rest.history(with: alice.id, before: page.last!.messageId, limit: 50)
        XCTAssertEqual(page.count, 5)
        XCTAssertEqual(Set((page + next).map(\.text)), Set(tail + ["hi alice", "hello bob"]))
        XCTAssertEqual((page + next).count, 12)
        let times = (page + next).map(\.sentAt)
        XCTAssertEqual(times, times.sorted(by: >))
        for client in [alicePhone, aliceTablet, bobPhone, bobTablet, bobTabletAgain] { await client.shutdown() }
    }

    func testTypingPresenceAndTURNCredentials() async throws {
        let harness = try SDKHarness(serverArguments: ["--turn-uris", "turn:127.0.0.1:3478?transport=udp", "--turn-secret", "s3cret"])
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        // Presence and typing reach only the users one has reached (the server's default
        // `contacts` scope), so Bob writes to Alice first, then goes offline.
        let (bobFirst, bobFirstLog) = harness.client("bob-phone")
        try await harness.connect(bobFirst, bobFirstLog, as: bob)
        _ = try await bobFirst.sendAndWait(OutgoingMessage(to: [alice.id], text: "hi"))
        await bobFirst.shutdown()
        let (aliceClient, aliceLog) = harness.client("alice-phone")
        try await harness.connect(aliceClient, aliceLog, as: alice)
        try await aliceClient.subscribePresence([bob.id])
        let offline = await aliceLog.waitUntil { $0.presence.contains { $0.userId == bob.id && !$0.online } }
        XCTAssertTrue(offline, "bob never connected")
        let (bobClient, bobLog) = harness.client("bob-tablet")
        try await harness.connect(bobClient, bobLog, as: bob)
        let online = await aliceLog.waitUntil { $0.presence.contains { $0.userId == bob.id && $0.online } }
        XCTAssertTrue(online)
        await bobClient.setTyping(to: alice.id, active: true)
        let typing = await aliceLog.waitUntil { $0.typing.contains { $0.from == bob.id && $0.active } }
        XCTAssertTrue(typing)

        let credentials = try await aliceClient.rest().turnCredentials()
        let turn = try XCTUnwrap(credentials)
        XCTAssertEqual(turn.uris, ["turn:127.0.0.1:3478?transport=udp"])
        XCTAssertTrue(turn.username.hasSuffix(":" + alice.id))
        XCTAssertFalse(turn.password.isEmpty)
        XCTAssertGreaterThan(turn.ttlSeconds, 0)
        // Without a session the REST calls are refused with the typed error.
        let anonymous = ParleyREST(server: harness.serverURL, http: LinuxHTTPTransport(client: HTTPClientBox.shared(group: harness.group)),
                                   sessionToken: "r:ffffffffffffffffffffffffffffffff")
        do {
            _ = try await anonymous.history(with: bob.id)
            XCTFail("an invalid session must be refused")
        } catch {
            XCTAssertEqual(error, .invalidSession)
        }
        await aliceClient.shutdown()
        await bobClient.shutdown()
    }
}
