import Synchronization
import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres
@testable import ParleyRealtime
import ParleyTestSupport
import XCTest

/// The delivery queue and messaging functions against a real PostgreSQL.
final class DeliveryQueueTests: XCTestCase {
    var env: RealtimeTestEnvironment!

    override func setUp() async throws {
        env = try await RealtimeTestEnvironment()
    }

    override func tearDown() async throws {
        await env?.shutdown()
        env = nil
    }

    func testFanOutToRecipientDevicesAndTheSendersOtherDevices() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("alice", "a1")
        _ = try await env.register("alice", "a2")
        _ = try await env.register("bob", "b1")
        _ = try await env.register("bob", "b2")
        let sent = try await env.sendOK("hi", from: "alice", device: "a1", to: ["bob", "ghost"])
        XCTAssertEqual(sent.recipients, ["bob"])
        XCTAssertEqual(sent.failed, ["ghost"])
        XCTAssertFalse(sent.duplicate)
        XCTAssertTrue(MessageID.isValid(sent.messageId))
        for (user, device) in [("bob", "b1"), ("bob", "b2"), ("alice", "a2")] {
            let events = try await env.events(user, device)
            XCTAssertEqual(events.map(\.seq), [1], "\(user)/\(device)")
            guard case .message(let message)? = events.first?.body else { return XCTFail("no message for \(user)/\(device)") }
            XCTAssertEqual(message, MessageRecord(id: sent.messageId, from: "alice", to: ["bob"], text: "hi", headersJSON: "{}", sentAt: sent.sentAt))
        }
        let own = try await env.events("alice", "a1")
        XCTAssertTrue(own.isEmpty, "the sending device gets no copy")
        // A REST send (no device) reaches every device of the sender.
        _ = try await env.sendOK("rest", from: "alice", to: ["bob"])
        let a1 = try await env.texts("alice", "a1")
        XCTAssertEqual(a1, ["rest"])
        let b1 = try await env.texts("bob", "b1")
        XCTAssertEqual(b1, ["hi", "rest"])
    }

    func testResendingTheSameClientMessageIDIsIdempotent() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("bob", "b1")
        let first = try await env.sendOK("once", from: "alice", device: "a1", to: ["bob"], clientID: "c-1")
        let again = try await env.sendOK("once", from: "alice", device: "a1", to: ["bob"], clientID: "c-1")
        XCTAssertTrue(again.duplicate)
        XCTAssertEqual(again.messageId, first.messageId)
        XCTAssertEqual(again.sentAt, first.sentAt)
        // Same id from another sender is another message.
        let other = try await env.sendOK("once", from: "bob", device: "b1", to: ["alice"], clientID: "c-1")
        XCTAssertNotEqual(other.messageId, first.messageId)
        let texts = try await env.texts("bob", "b1")
        XCTAssertEqual(texts, ["once"])
        // Concurrent duplicates in one batch: one message, the others duplicates.
        let loop = env.group.loops[1]
        let service = env.service
        let results = await withTaskGroup(of: SendResult?.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    await service.send(SendMessageRequest(clientMessageId: "c-2", to: ["bob"], text: "burst", headersJSON: "{}"),
                                       from: "alice", device: nil, on: loop).value
                }
            }
            var all: [SendResult] = []
            for await result in group { if let result { all.append(result) } }
            return all
        }
        XCTAssertEqual(results.count, 5)
        XCTAssertEqual(Set(results.map(\.messageId)).count, 1)
        XCTAssertEqual(results.filter { !$0.duplicate }.count, 1)
        let after = try await env.texts("bob", "b1")
        XCTAssertEqual(after, ["once", "burst"])
    }

    func testUnknownRecipients() async throws {
        try await env.makeUsers("alice")
        let failure = try await env.sendFailure("x", from: "alice", to: ["ghost1", "ghost2"])
        XCTAssertEqual(failure.code, .userNotFound)
        XCTAssertEqual(failure.failedRecipients, ["ghost1", "ghost2"])
        let count = try await env.sql("SELECT count(*) AS n FROM rt_messages").first?["n"].int
        XCTAssertEqual(count, 0)
    }

    func testFirstDeviceOfAUserReceivesWhatArrivedBeforeIt() async throws {
        try await env.makeUsers("alice", "bob")
        for text in ["one", "two", "three"] { _ = try await env.sendOK(text, from: "alice", to: ["bob"]) }
        let first = try await env.register("bob", "phone")
        XCTAssertEqual(first, DeliveryQueue.DeviceState(lastSeq: 3, trimmedSeq: 0, created: true))
        let texts = try await env.texts("bob", "phone")
        XCTAssertEqual(texts, ["one", "two", "three"])
        let inbox = try await env.sql("SELECT count(*) AS n FROM rt_queue WHERE device_id = ''").first?["n"].int
        XCTAssertEqual(inbox, 0)
        // A second device starts empty; both get new messages.
        let second = try await env.register("bob", "tablet")
        XCTAssertEqual(second.lastSeq, 0)
        _ = try await env.sendOK("four", from: "alice", to: ["bob"])
        let phone = try await env.events("bob", "phone")
        XCTAssertEqual(phone.map(\.seq), [1, 2, 3, 4])
        let tablet = try await env.texts("bob", "tablet")
        XCTAssertEqual(tablet, ["four"])
        // Registering again reports the device's state without creating it.
        let again = try await env.register("bob", "phone", connection: 2)
        XCTAssertEqual(again, DeliveryQueue.DeviceState(lastSeq: 4, trimmedSeq: 0, created: false))
    }

    func testAcknowledgingHidesEventsAndSendsDeliveredReceipts() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("alice", "a1")
        _ = try await env.register("bob", "b1")
        let m1 = try await env.sendOK("m1", from: "alice", device: "a1", to: ["bob"])
        let m2 = try await env.sendOK("m2", from: "alice", device: "a1", to: ["bob"])
        let receipts = try await env.queue.acknowledge([(DeviceKey(userId: "bob", deviceId: "b1"), 1)])
        XCTAssertEqual(receipts.map(\.device), [DeviceKey(userId: "alice", deviceId: "a1")])
        let remaining = try await env.events("bob", "b1")
        XCTAssertEqual(remaining.map(\.seq), [2])
        let alice = try await env.events("alice", "a1")
        guard case .receipt(let kind, let messageId, let userId, _)? = alice.first?.body else { return XCTFail("no receipt") }
        XCTAssertEqual([kind, messageId, userId], ["delivered", m1.messageId, "bob"])
        // Acknowledging again (or less) changes nothing; the receipts themselves produce no receipts.
        let repeated = try await env.queue.acknowledge([(DeviceKey(userId: "bob", deviceId: "b1"), 1)])
        XCTAssertTrue(repeated.isEmpty)
        let own = try await env.queue.acknowledge([(DeviceKey(userId: "alice", deviceId: "a1"), 1)])
        XCTAssertTrue(own.isEmpty)
        // Read receipts only for messages sent to the reader.
        let read = try await env.queue.markRead(userId: "bob", messageIDs: [m2.messageId, m1.messageId, MessageID.make(milliseconds: 1)])
        XCTAssertEqual(read.count, 2)
        let notRecipient = try await env.queue.markRead(userId: "alice", messageIDs: [m2.messageId])
        XCTAssertTrue(notRecipient.isEmpty)
        let kinds = try await env.events("alice", "a1").compactMap { event -> String? in
            if case .receipt(let kind, let id, _, _)? = event.body { return "\(kind) \(id == m1.messageId ? "m1" : "m2")" }
            return nil
        }
        XCTAssertEqual(kinds, ["read m2", "read m1"])
    }

    func testAcknowledgingRemovesOnlyTheAcknowledgedEvents() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("bob", "b1")
        for text in ["m1", "m2", "m3", "m4"] { _ = try await env.sendOK(text, from: "alice", to: ["bob"]) }
        let bob = DeviceKey(userId: "bob", deviceId: "b1")
        _ = try await env.queue.acknowledge([(bob, 2)])
        let afterZero = try await env.events("bob", "b1")
        XCTAssertEqual(afterZero.map(\.seq), [3, 4])
        let afterThree = try await env.events("bob", "b1", after: 3)
        XCTAssertEqual(afterThree.map(\.seq), [4])
        // A lower acknowledgement removes nothing more and produces no receipts again.
        let lower = try await env.queue.acknowledge([(bob, 1)])
        XCTAssertTrue(lower.isEmpty)
        let rows = try await env.sql("SELECT array_agg(seq ORDER BY seq)::text AS seqs FROM rt_queue WHERE user_id = 'bob'").first?["seqs"].string
        XCTAssertEqual(rows, "{3,4}")
        // Two acknowledgements of one device in one batch count once, at the highest.
        _ = try await env.sendOK("m5", from: "alice", to: ["bob"])
        let receipts = try await env.queue.acknowledge([(bob, 3), (bob, 5)])
        XCTAssertEqual(receipts.map(\.seq), [3, 4, 5], "Alice's inbox: one batch of three receipts")
        let inbox = try await env.sql("SELECT count(*) AS n FROM rt_queue WHERE user_id = 'alice'").first?["n"].int
        XCTAssertEqual(inbox, 2, "the batch of two, then the batch of three")
        let last = try await env.events("bob", "b1")
        XCTAssertTrue(last.isEmpty)
    }

    func testReceiptBatchesExpandToOneEventPerMessageWithConsecutiveSeqs() async throws {
        try await env.makeUsers("alice", "bob", "carol")
        _ = try await env.register("alice", "a1")
        _ = try await env.register("alice", "a2")
        _ = try await env.register("bob", "b1")
        _ = try await env.register("carol", "c1")
        var ids: [String] = []
        for index in 0..<300 {
            ids.append(try await env.sendOK("m\(index)", from: "alice", device: "a1", to: ["bob", "carol"]).messageId)
        }
        // Both recipients acknowledge everything at once: per sender device, one batch per
        // acknowledging user and 256 ids, expanded to one receipt per message.
        let receipts = try await env.queue.acknowledge([(DeviceKey(userId: "bob", deviceId: "b1"), 300),
                                                        (DeviceKey(userId: "carol", deviceId: "c1"), 300)])
        XCTAssertEqual(receipts.count, 2 * 600)
        let rows = try await env.sql("""
            SELECT count(*) AS n, sum(cardinality(message_ids)) AS ids FROM rt_queue WHERE user_id = 'alice' AND device_id = 'a1'
            """).first
        XCTAssertEqual(rows?["n"].int, 4, "two batches (256 + 44 ids) per acknowledging user")
        XCTAssertEqual(rows?["ids"].int, 600)
        // a2 got the messages too (seqs 1...300), then its receipts.
        for device in ["a1", "a2"] {
            let first = device == "a1" ? 1 : 301
            let events = try await env.events("alice", device, after: Int64(first - 1))
            XCTAssertEqual(events.map(\.seq), Array(Int64(first)...Int64(first + 599)), device)
            var byUser: [String: [String]] = [:]
            for event in events {
                guard case .receipt(let kind, let messageId, let userId, _)? = event.body else { return XCTFail("not a receipt") }
                XCTAssertEqual(kind, "delivered")
                byUser[userId, default: []].append(messageId)
            }
            XCTAssertEqual(byUser["bob"], ids, device)
            XCTAssertEqual(byUser["carol"], ids, device)
        }
        // The events handed to connections are the same, one per message with its seq.
        let live = receipts.filter { $0.device.deviceId == "a1" }
        XCTAssertEqual(live.map(\.seq), Array(1...600))
        XCTAssertEqual(Set(live.compactMap(\.messageID)), Set(ids))
        // Resuming in the middle of a batch starts right after the resume point.
        let middle = try await env.events("alice", "a1", after: 100)
        XCTAssertEqual(middle.first?.seq, 101)
        XCTAssertEqual(middle.count, 500)
        guard case .receipt(_, let messageId, _, _)? = middle.first?.body else { return XCTFail("not a receipt") }
        XCTAssertEqual(messageId, ids[100], "seq 101 is the receipt of the 101st message (Bob's receipts come first)")
        // An acknowledgement into the middle of a batch keeps the batch (the rest is not acknowledged);
        // one that covers it removes it.
        let a1 = DeviceKey(userId: "alice", deviceId: "a1")
        _ = try await env.queue.acknowledge([(a1, 130)])
        let rest = try await env.events("alice", "a1", after: 130)
        XCTAssertEqual(rest.map(\.seq), Array(131...600))
        _ = try await env.queue.acknowledge([(a1, 256)])
        let batches = try await env.sql("SELECT array_agg(seq ORDER BY seq)::text AS seqs FROM rt_queue WHERE user_id = 'alice' AND device_id = 'a1'")
        XCTAssertEqual(batches.first?["seqs"].string, "{300,556,600}")
    }

    func testReceiptBatchesInAnInboxAreRenumberedByTheFirstDevice() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("bob", "b1")
        var ids: [String] = []
        for index in 0..<3 { ids.append(try await env.sendOK("m\(index)", from: "alice", to: ["bob"]).messageId) }
        _ = try await env.queue.acknowledge([(DeviceKey(userId: "bob", deviceId: "b1"), 3)])
        _ = try await env.sendOK("reply", from: "bob", device: "b1", to: ["alice"])
        // Alice had no device: a batch of three receipts, then a message, wait in her inbox.
        let state = try await env.register("alice", "a1")
        XCTAssertEqual(state, DeliveryQueue.DeviceState(lastSeq: 4, trimmedSeq: 0, created: true))
        let events = try await env.events("alice", "a1")
        XCTAssertEqual(events.map(\.seq), [1, 2, 3, 4])
        let receiptIDs = events.compactMap { event -> String? in
            if case .receipt(_, let id, _, _)? = event.body { return id }
            return nil
        }
        XCTAssertEqual(receiptIDs, ids)
        guard case .message(let message)? = events.last?.body else { return XCTFail("no message") }
        XCTAssertEqual(message.text, "reply")
        _ = try await env.sendOK("next", from: "bob", device: "b1", to: ["alice"])
        let next = try await env.events("alice", "a1", after: 4)
        XCTAssertEqual(next.map(\.seq), [5])
    }

    func testRetentionOfAReceiptBatchMarksTheGapAtItsLastSeq() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("alice", "a1")
        _ = try await env.register("bob", "b1")
        for text in ["m1", "m2", "m3"] { _ = try await env.sendOK(text, from: "alice", device: "a1", to: ["bob"]) }
        _ = try await env.queue.acknowledge([(DeviceKey(userId: "bob", deviceId: "b1"), 3)])
        _ = try await env.sendOK("m4", from: "bob", device: "b1", to: ["alice"])
        // Alice's queue: receipts 1...3 (one row, seq 3), then message 4. The batch ages out.
        try await env.sql("UPDATE rt_queue SET created_at = now() - interval '31 days' WHERE user_id = 'alice' AND seq = 3")
        let removed = try await env.queue.trim(retention: .seconds(30 * 86_400))
        XCTAssertEqual(removed, 1)
        let state = try await env.register("alice", "a1", connection: 2)
        XCTAssertEqual(state, DeliveryQueue.DeviceState(lastSeq: 4, trimmedSeq: 3, created: false))
        let events = try await env.events("alice", "a1", after: 1)
        XCTAssertEqual(events.map(\.seq), [4])
    }

    func testRetentionTrimsOldEventsAndMarksTheGap() async throws {
        try await env.makeUsers("alice", "bob", "carol")
        _ = try await env.register("bob", "b1")
        for text in ["old1", "old2", "new"] { _ = try await env.sendOK(text, from: "alice", to: ["bob", "carol"]) }
        try await env.sql("UPDATE rt_queue SET created_at = now() - interval '31 days' WHERE seq <= 2")
        // Expired events go without marking a gap.
        try await env.queue.enqueue(event: ["type": "call.incoming", "callId": "c1"], toDevicesOf: ["bob"], expiresAt: UTCTime.nowMilliseconds() - 1000)
        let expiredHidden = try await env.events("bob", "b1")
        XCTAssertEqual(expiredHidden.map(\.seq), [1, 2, 3])
        let removed = try await env.queue.trim(retention: .seconds(30 * 86_400))
        XCTAssertEqual(removed, 5)
        let state = try await env.register("bob", "b1", connection: 2)
        XCTAssertEqual(state.trimmedSeq, 2)
        XCTAssertEqual(state.lastSeq, 4)
        // Carol had no device: her first device starts after a trimmed seq 1, so its welcome says gap.
        let carol = try await env.register("carol", "c1")
        XCTAssertEqual(carol, DeliveryQueue.DeviceState(lastSeq: 2, trimmedSeq: 1, created: true))
        let texts = try await env.texts("carol", "c1")
        XCTAssertEqual(texts, ["new"])
        // Devices unused for the whole retention period are forgotten with their queue.
        try await env.sql("UPDATE rt_devices SET last_seen_at = now() - interval '40 days', node_id = NULL WHERE user_id = 'bob'")
        _ = try await env.queue.trim(retention: .seconds(30 * 86_400))
        let devices = try await env.sql("SELECT count(*) AS n FROM rt_devices WHERE user_id = 'bob'").first?["n"].int
        XCTAssertEqual(devices, 0)
    }

    func testCustomEventsForCalls() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.register("bob", "b1")
        _ = try await env.register("bob", "b2")
        let queued = try await env.queue.enqueue(event: ["type": "call.incoming", "callId": "c1", "from": "alice"], toDevicesOf: ["bob"],
                                                 excluding: DeviceKey(userId: "bob", deviceId: "b2"),
                                                 expiresAt: UTCTime.nowMilliseconds() + 60_000)
        XCTAssertEqual(queued, [EnqueuedEvent(device: DeviceKey(userId: "bob", deviceId: "b1"), seq: 1, kind: "call.incoming", connected: true)])
        let only = try await env.queue.enqueue(event: ["type": "call.ended", "callId": "c1"], toDevicesOf: ["bob"],
                                               onlyDevice: DeviceKey(userId: "bob", deviceId: "b2"))
        XCTAssertEqual(only.map(\.device.deviceId), ["b2"])
        let events = try await env.events("bob", "b1")
        XCTAssertEqual(events.first?.body, .custom(["type": "call.incoming", "callId": "c1", "from": "alice"]))
        do {
            try await env.queue.enqueue(event: ["callId": "x"], toDevicesOf: ["bob"])
            XCTFail("an event without a type was accepted")
        } catch {
            XCTAssertEqual(error.code, .badRequest)
        }
    }

    func testConcurrentBatchesKeepEveryDeviceInCommitOrder() async throws {
        let senders = (0..<20).map { "s\($0)" }
        for sender in senders { try await env.makeUsers(sender) }
        try await env.makeUsers("target")
        _ = try await env.register("target", "t1")
        _ = try await env.register("target", "t2")
        let service = env.service
        let loops = env.group.loops
        let results = await withTaskGroup(of: (String, Int, SendResult?).self) { group in
            for (index, sender) in senders.enumerated() {
                group.addTask {
                    var last: SendResult?
                    for n in 0..<15 {
                        last = await service.send(SendMessageRequest(clientMessageId: "\(sender)-\(n)", to: ["target", senders[(index + 1) % senders.count]],
                                                                     text: "\(sender) \(n)", headersJSON: "{}"),
                                                  from: sender, device: nil, on: loops[index % loops.count]).value
                        if last == nil { break }
                    }
                    return (sender, 15, last)
                }
            }
            var all: [(String, Int, SendResult?)] = []
            for await result in group { all.append(result) }
            return all
        }
        XCTAssertTrue(results.allSatisfy { $0.2 != nil })
        for device in ["t1", "t2"] {
            let events = try await env.events("target", device)
            XCTAssertEqual(events.map(\.seq), Array(1...300), "seqs are contiguous")
            let texts = events.compactMap { event -> String? in
                if case .message(let message)? = event.body { return message.text }
                return nil
            }
            XCTAssertEqual(Set(texts).count, 300)
            // Each sender's messages arrive in the order it sent them.
            for sender in senders {
                let mine = texts.filter { $0.hasPrefix(sender + " ") }.map { Int($0.split(separator: " ")[1])! }
                XCTAssertEqual(mine, Array(0..<15), sender)
            }
        }
        let batches = try await env.sql("SELECT count(*) AS n FROM rt_messages").first?["n"].int
        XCTAssertEqual(batches, 300)
    }

    func testDeviceLimitAndReplacementNotification() async throws {
        try await env.makeUsers("alice")
        _ = try await env.register("alice", "d1", maxDevices: 2)
        _ = try await env.register("alice", "d2", maxDevices: 2)
        do {
            _ = try await env.register("alice", "d3", maxDevices: 2)
            XCTFail("a third device was accepted")
        } catch {
            XCTAssertEqual((error as? RealtimeFailure)?.code, .tooManyDevices)
        }
        // An older connection's late registration does not overwrite a newer one.
        _ = try await env.register("alice", "d1", connection: 10)
        _ = try await env.register("alice", "d1", connection: 5)
        let recorded = try await env.sql("SELECT connection_id FROM rt_devices WHERE device_id = 'd1'").first?["connection_id"].int
        XCTAssertEqual(recorded, 10)
        env.queue.deviceDisconnected(DeviceKey(userId: "alice", deviceId: "d1"), connectionID: 5)
        let queue = env.queue
        let written = await eventually { queue.pendingDisconnects == 0 }
        XCTAssertTrue(written)
        let stillConnected = try await env.sql("SELECT node_id FROM rt_devices WHERE device_id = 'd1'").first?["node_id"].string
        XCTAssertEqual(stillConnected, env.service.nodeID)
        env.queue.deviceDisconnected(DeviceKey(userId: "alice", deviceId: "d1"), connectionID: 10)
        let writtenToo = await eventually { queue.pendingDisconnects == 0 }
        XCTAssertTrue(writtenToo)
        let offline = try await env.sql("SELECT node_id FROM rt_devices WHERE device_id = 'd1'").first?["node_id"].isNull
        XCTAssertEqual(offline, true)
    }

    func testABurstOfDisconnectsIsRecordedInBatchesAndOnlyForThisNode() async throws {
        try await env.makeUsers("alice", "bob")
        // 3,000 connected devices of alice on this node, one of bob on another node with the same connection id.
        _ = try await env.sql("""
            INSERT INTO rt_devices (user_id, device_id, node_id, connection_id)
            SELECT 'alice', 'd' || g, '\(env.service.nodeID)', g FROM generate_series(1, 3000) g
            """)
        _ = try await env.sql("INSERT INTO rt_devices (user_id, device_id, node_id, connection_id) VALUES ('bob', 'b1', 'othernode0002', 7)")
        for n in 1...3000 {
            env.queue.deviceDisconnected(DeviceKey(userId: "alice", deviceId: "d\(n)"), connectionID: UInt64(n))
        }
        env.queue.deviceDisconnected(DeviceKey(userId: "bob", deviceId: "b1"), connectionID: 7)
        let queue = env.queue
        let written = await eventually { queue.pendingDisconnects == 0 }
        XCTAssertTrue(written)
        let connected = try await env.sql("SELECT count(*) AS n FROM rt_devices WHERE user_id = 'alice' AND node_id IS NOT NULL").first?["n"].int
        XCTAssertEqual(connected, 0)
        let bob = try await env.sql("SELECT node_id FROM rt_devices WHERE user_id = 'bob'").first?["node_id"].string
        XCTAssertEqual(bob, "othernode0002")
    }

    func testOtherNodesAreNotifiedOfEventsAndReplacements() async throws {
        try await env.makeUsers("alice", "bob")
        // Bob's device is connected to node "othernode0001".
        let other = DeliveryQueue(database: env.client, registry: ConnectionRegistry(), nodeID: "othernode0001")
        _ = try await other.registerDevice(DeviceKey(userId: "bob", deviceId: "b1"), connectionID: 77, maxDevices: 20)
        let received = NotificationBox()
        let loop = env.group.loops[0]
        let connectionString = env.connectionString
        let listener = try await onLoop(loop) {
            let listener = PostgresListener(loop: loop, configuration: PostgresConfiguration(connectionString: connectionString)) { received.append($0) }
            listener.listen("parley_rt_othernode0001")
            listener.start()
            return LoopBound(listener, loop: loop)
        }
        let listening = await eventually { await onLoopValue(loop) { listener.value.isListening } }
        XCTAssertTrue(listening)
        _ = try await env.sendOK("hi", from: "alice", to: ["bob"])
        let hinted = await eventually { received.payloads.contains("e bob b1 1") }
        XCTAssertTrue(hinted, "\(received.payloads)")
        // The device connects to this node: the other node is told to close connection 77.
        _ = try await env.register("bob", "b1", connection: 3)
        let replaced = await eventually { received.payloads.contains("r bob b1 77") }
        XCTAssertTrue(replaced, "\(received.payloads)")
        try await onLoop(loop) { listener.value.close() }
    }

    func testInstallationsAreDevices() async throws {
        try await env.makeUsers("alice", "bob")
        _ = try await env.sendOK("before install", from: "alice", to: ["bob"])
        try await env.sql("INSERT INTO installations (object_id, installation_id, user_id) VALUES ('i1', 'inst-123', 'bob')")
        let texts = try await env.texts("bob", "inst-123")
        XCTAssertEqual(texts, ["before install"])
        try await env.sql("INSERT INTO installations (object_id, installation_id, user_id) VALUES ('i2', 'bad id with spaces', 'bob')")
        let devices = try await env.sql("SELECT device_id FROM rt_devices ORDER BY device_id").map { $0["device_id"].string }
        XCTAssertEqual(devices, ["inst-123"])
    }

    func testTheHeartbeatsDeviceLimitAppliesToInstallations() async throws {
        try await env.makeUsers("carol")
        _ = try await env.queue.heartbeat(staleAfter: .seconds(45), maxDevices: 2)
        _ = try await env.register("carol", "socket-1", maxDevices: 2)
        try await env.sql("INSERT INTO installations (object_id, installation_id, user_id) VALUES ('c1', 'inst-1', 'carol')")
        do {
            try await env.sql("INSERT INTO installations (object_id, installation_id, user_id) VALUES ('c2', 'inst-2', 'carol')")
            XCTFail("a third device through an installation")
        } catch {
            XCTAssertEqual((error as? PostgresError)?.sqlState, "PR001")
        }
        let devices = try await env.sql("SELECT device_id FROM rt_devices WHERE user_id = 'carol' ORDER BY 1").map { $0["device_id"].string }
        XCTAssertEqual(devices, ["inst-1", "socket-1"])
        _ = try await env.queue.heartbeat(staleAfter: .seconds(45), maxDevices: 3)
        try await env.sql("INSERT INTO installations (object_id, installation_id, user_id) VALUES ('c2', 'inst-2', 'carol')")
        let limit = try await env.sql("SELECT max_devices FROM rt_settings").first?["max_devices"].int
        XCTAssertEqual(limit, 3, "the last heartbeat's limit")
    }

    func testContactsAreRecordedByTheSendForNewPairsOnly() async throws {
        try await env.makeUsers("kim", "paul", "sam")
        let before = try await env.service.contacts.reached("paul", among: ["kim", "sam"])
        XCTAssertEqual(before, [])
        _ = try await env.sendOK("hi paul", from: "kim", to: ["paul", "ghost"])
        XCTAssertTrue(env.service.contacts.isKnown(from: "kim", to: "paul"), "remembered after the commit")
        let rows = try await env.sql("SELECT user_id || '>' || contact_id AS pair FROM rt_contacts ORDER BY 1").map { $0["pair"].string }
        XCTAssertEqual(rows, ["kim>paul"], "unknown recipients are no contacts")
        let reachedPaul = try await env.service.contacts.reached("paul", among: ["kim", "sam"])
        XCTAssertEqual(reachedPaul, ["kim"])
        let reachedKim = try await env.service.contacts.reached("kim", among: ["paul"])
        XCTAssertEqual(reachedKim, [], "paul never wrote to kim")
        try await env.sql("DELETE FROM rt_contacts")
        _ = try await env.sendOK("again", from: "kim", to: ["paul"])
        let again = try await env.sql("SELECT count(*) AS n FROM rt_contacts").first?["n"].int
        XCTAssertEqual(again, 0, "a pair this node knows is not written again")
    }

    func testHistoryPagesNewestFirst() async throws {
        try await env.makeUsers("alice", "bob", "carol")
        var sent: [String] = []
        for n in 0..<7 {
            let from = n % 2 == 0 ? "alice" : "bob"
            let to = n % 2 == 0 ? "bob" : "alice"
            sent.append(try await env.sendOK("m\(n)", from: from, to: [to]).messageId)
            _ = try await env.sendOK("noise\(n)", from: "alice", to: ["carol"])
        }
        let store = env.service.messages
        let page1 = try await store.history(userId: "alice", with: "bob", before: nil, limit: 3)
        XCTAssertEqual(page1.map(\.text), ["m6", "m5", "m4"])
        let page2 = try await store.history(userId: "bob", with: "alice", before: page1.last?.id, limit: 3)
        XCTAssertEqual(page2.map(\.text), ["m3", "m2", "m1"])
        let page3 = try await store.history(userId: "alice", with: "bob", before: page2.last?.id, limit: 3)
        XCTAssertEqual(page3.map(\.text), ["m0"])
        let outsider = try await store.history(userId: "carol", with: "bob", before: nil, limit: 10)
        XCTAssertTrue(outsider.isEmpty)
    }
}

/// Collects notification payloads from the listener's loop.
final class NotificationBox: Sendable {
    private let storage = Mutex<[String]>([])
    func append(_ notification: PostgresNotification) { storage.withLock { $0.append(notification.payload) } }
    var payloads: [String] { storage.withLock { $0 } }
}

func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await Task(executorPreference: loop) { try await body() }.value
}

func onLoopValue<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
    await Task(executorPreference: loop) { body() }.value
}

func eventually(timeout: Duration = .seconds(10), _ condition: @Sendable () async -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
