import Foundation
import ParleyJSON
@testable import ParleyKit
import ParleyKitLinux
import XCTest

/// Restarts of the app and crashes of the server, against a real server.
final class ResilienceTests: XCTestCase {
    /// The app is killed with messages in its outbox, some of them already stored by the server
    /// (their `ok` never reached the app); restarted, it sends each message exactly once.
    func testAnAppKilledWithAFullOutboxSendsEachMessageExactlyOnceAfterRestart() async throws {
        let harness = try SDKHarness()
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (bobPhone, bobLog) = harness.client("bob-phone")
        try await harness.connect(bobPhone, bobLog, as: bob)

        // First life: the server gets every send, but the app hears none of the answers.
        let deaf = OkDroppingTransport(inner: LinuxTransport(group: harness.group, blockingPool: harness.pool))
        let (first, firstLog) = harness.client("alice-phone", transport: deaf)
        try await harness.connect(first, firstLog, as: alice)
        var ids: [String] = []
        for index in 0..<20 { ids.append(try await first.send(OutgoingMessage(to: [bob.id], text: "m\(index)"))) }
        let stored = await bobLog.waitUntil { $0.messages.count == 20 }
        XCTAssertTrue(stored, "the server stored the sends of the first life")
        let outboxBeforeKill = await first.pendingOutbox.map(\.clientMessageId)
        XCTAssertEqual(outboxBeforeKill, ids, "no ok arrived, so every message is still in the outbox")
        // And a few more that never left the device at all (the socket is closed first).
        await first.disconnect()
        for index in 20..<25 { ids.append(try await first.send(OutgoingMessage(to: [bob.id], text: "m\(index)"))) }
        await first.shutdown()

        // Second life: same storage directory, normal transport.
        let (second, secondLog) = harness.client("alice-phone")
        try await harness.connect(second, secondLog, as: alice)
        let allSent = await secondLog.waitUntil { $0.sent.count == 25 }
        XCTAssertTrue(allSent)
        let results = await secondLog.sent
        XCTAssertEqual(Set(results.keys), Set(ids), "the same clientMessageIds were re-sent")
        let duplicates = results.values.filter { (try? $0.get().duplicate) == true }.count
        XCTAssertEqual(duplicates, 20, "the server had the first twenty already")
        let delivered = await bobLog.waitUntil { $0.messages.count >= 25 }
        XCTAssertTrue(delivered)
        let texts = await bobLog.messageTexts
        XCTAssertEqual(texts, (0..<25).map { "m\($0)" }, "each message exactly once, in order")
        let outboxAfter = await second.pendingOutbox
        XCTAssertEqual(outboxAfter, [])
        await second.shutdown()
        await bobPhone.shutdown()

        // A third life finds an empty outbox on disk.
        let reloaded = try await FileStorage(directory: harness.root + "/alice-phone").load()
        XCTAssertEqual(reloaded.outbox, [])
    }

    /// The server is killed with SIGKILL while 300 messages stream from Alice to Bob; after it
    /// comes back, nothing that was acknowledged is lost and nothing is shown twice.
    func testServerKilledMidStreamLosesNothingAcknowledgedAndShowsNothingTwice() async throws {
        let harness = try SDKHarness()
        let alice = try harness.signUp("alice")
        let bob = try harness.signUp("bob")
        let (sender, senderLog) = harness.client("alice-phone")
        let (receiver, receiverLog) = harness.client("bob-phone")
        try await harness.connect(sender, senderLog, as: alice)
        try await harness.connect(receiver, receiverLog, as: bob)
        // Bob's app stores each message slowly, so some are in flight when the server dies.
        await receiverLog.setOnMessage { _ in try? await Task.sleep(for: .milliseconds(2)) }

        let total = 300
        for index in 0..<total { try await sender.send(OutgoingMessage(to: [bob.id], text: "n\(index)")) }
        let midway = await receiverLog.waitUntil { $0.messages.count >= 60 }
        XCTAssertTrue(midway)
        harness.killServer()
        let receivedAtKill = await receiverLog.messages.count
        XCTAssertLessThan(receivedAtKill, total, "the kill lands mid-stream")
        let acknowledgedAtKill = await senderLog.sent.values.compactMap { try? $0.get().messageId }
        try harness.restartServer()

        let allSent = await senderLog.waitUntil(timeout: .seconds(60)) { $0.sent.count == total }
        XCTAssertTrue(allSent)
        let allReceived = await receiverLog.waitUntil(timeout: .seconds(60)) { $0.messages.count >= total }
        XCTAssertTrue(allReceived)
        let received = await receiverLog.messages
        XCTAssertEqual(received.count, total, "nothing shown twice")
        XCTAssertEqual(Set(received.map(\.messageId)).count, total)
        XCTAssertEqual(received.map(\.text), (0..<total).map { "n\($0)" }, "one sender device's messages arrive in send order")
        let receivedIDs = Set(received.map(\.messageId))
        XCTAssertTrue(Set(acknowledgedAtKill).isSubset(of: receivedIDs), "every message acknowledged before the kill arrived")
        let sawDrop = await receiverLog.waitUntil { $0.states.contains { if case .waitingToReconnect = $0 { true } else { false } } }
        XCTAssertTrue(sawDrop, "the client saw the drop")
        await sender.shutdown()
        await receiver.shutdown()
    }
}

/// A transport whose sockets swallow every `ok` from the server (an app that dies right after
/// its sends left): the server stores the messages, the app never learns it.
struct OkDroppingTransport: ParleyTransport {
    let inner: any ParleyTransport

    func open(url: ParleyServerURL, events: ParleySocketEvents) -> any ParleySocket {
        let (stream, sink) = AsyncStream.makeStream(of: ParleySocketEvents.SocketEvent.self)
        let forward = events
        Task {
            for await event in stream {
                if case .text(_, let text) = event, text.hasPrefix("{\"type\":\"ok\"") { continue }
                forward.continuation.yield(event)
            }
        }
        return inner.open(url: url, events: ParleySocketEvents(id: events.id, continuation: sink))
    }
}
