import ParleyJSON
@testable import ParleyKit
import XCTest

/// The sans-I/O client state machine, without sockets: every frame in every phase, the outbox,
/// dedupe, the cursor, backoff, timers and close codes.
final class ClientStateMachineTests: XCTestCase {
    typealias Machine = ParleyClientStateMachine
    typealias Action = ParleyClientStateMachine.Action

    static let url = ParleyServerURL("http://127.0.0.1:8080")!

    func configuration(_ change: (inout ParleyClientConfiguration) -> Void = { _ in }) -> ParleyClientConfiguration {
        var configuration = ParleyClientConfiguration(serverURL: Self.url, deviceId: "dev-1", maxSendsInFlight: 3, ackBatchSize: 3,
                                                      ackDelayMilliseconds: 100, maxPendingEvents: 16)
        change(&configuration)
        return configuration
    }

    func machine(stored: ParleyStoredState = ParleyStoredState(), _ change: (inout ParleyClientConfiguration) -> Void = { _ in }) -> Machine {
        Machine(configuration: configuration(change), stored: stored, random: SplitMix64(seed: 7))
    }

    /// A machine with an open session (connection 1) at time 0.
    func connected(stored: ParleyStoredState = ParleyStoredState(), _ change: (inout ParleyClientConfiguration) -> Void = { _ in }) -> Machine {
        var m = machine(stored: stored, change)
        _ = m.start(sessionToken: "r:token", now: 0)
        _ = m.socketOpened(id: 1, now: 0)
        _ = m.received(welcome(), id: 1, now: 0)
        return m
    }

    func welcome(lastSeq: Int64 = 0, gap: Bool = false, reset: Bool = false) -> String {
        "{\"type\":\"welcome\",\"userId\":\"u1\",\"deviceId\":\"dev-1\",\"lastSeq\":\(lastSeq),\"gap\":\(gap)\(reset ? ",\"reset\":true" : "")}"
    }

    func message(seq: Int64, id: String, text: String = "hi") -> String {
        "{\"type\":\"message\",\"seq\":\(seq),\"messageId\":\"\(id)\",\"from\":\"u2\",\"to\":[\"u1\"],\"text\":\"\(text)\",\"headers\":{},\"sentAt\":\"2026-11-30T07:26:04.574Z\"}"
    }

    func receipt(seq: Int64, kind: String = "delivered", id: String, user: String = "u2") -> String {
        "{\"type\":\"receipt\",\"seq\":\(seq),\"kind\":\"\(kind)\",\"messageId\":\"\(id)\",\"userId\":\"\(user)\",\"at\":\"2026-11-30T07:26:04.585Z\"}"
    }

    func sends(_ actions: [Action]) -> [JSONValue] {
        actions.compactMap { if case .sendText(let text) = $0 { try? JSONParser().parse(text) } else { nil } }
    }

    func delivered(_ actions: [Action]) -> [IncomingEvent] {
        actions.compactMap { if case .deliver(let event) = $0 { event } else { nil } }
    }

    // MARK: Connecting

    func testStartOpensASocketAndHelloCarriesTheStoredCursor() {
        var m = machine(stored: ParleyStoredState(cursor: CursorRecord(seq: 41)))
        XCTAssertEqual(m.start(sessionToken: "r:abc", now: 0), [.openConnection(id: 1), .stateChanged(.connecting)])
        let hello = sends(m.socketOpened(id: 1, now: 5))
        XCTAssertEqual(hello, [["type": "hello", "sessionToken": "r:abc", "deviceId": "dev-1", "resumeAfter": 41]])
        let actions = m.received(welcome(lastSeq: 57), id: 1, now: 10)
        XCTAssertEqual(actions.first, .stateChanged(.connected(userId: "u1")))
        XCTAssertEqual(sends(actions), [["type": "ack", "upTo": 41]], "the stored cursor is acknowledged on every welcome")
        XCTAssertEqual(m.connectionState, .connected(userId: "u1"))
    }

    func testEveryFrameInEveryPhase() {
        let frames: [(name: String, text: String)] = [
            ("welcome", welcome()),
            ("ok", "{\"type\":\"ok\",\"re\":99}"),
            ("error", "{\"type\":\"error\",\"re\":99,\"code\":\"bad_request\",\"error\":\"x\"}"),
            ("error without id", "{\"type\":\"error\",\"re\":null,\"code\":\"bad_json\",\"error\":\"x\"}"),
            ("message", message(seq: 1, id: "m1")),
            ("receipt", receipt(seq: 2, id: "m0")),
            ("call.incoming", "{\"type\":\"call.incoming\",\"seq\":3,\"callId\":\"6f9619ff-8b86-d011-b42d-00c04fc964ff\",\"from\":\"u2\",\"sdp\":\"v=0\"}"),
            ("presence", "{\"type\":\"presence\",\"userId\":\"u2\",\"online\":true,\"lastSeenAt\":null}"),
            ("typing", "{\"type\":\"typing\",\"from\":\"u2\",\"active\":true}"),
            ("call.candidates", "{\"type\":\"call.candidates\",\"callId\":\"6f9619ff-8b86-d011-b42d-00c04fc964ff\",\"candidates\":[\"c\"]}"),
            ("custom queued", "{\"type\":\"x.thing\",\"seq\":4,\"a\":1}"),
            ("not JSON", "hello?"),
            ("not an object", "[1,2]"),
            ("no type", "{\"seq\":5}"),
            ("malformed message", "{\"type\":\"message\",\"seq\":6}"),
        ]
        // Builders for each phase, all on connection 1 except where said.
        let phases: [(name: String, make: () -> Machine)] = [
            ("idle", { self.machine() }),
            ("connecting", { var m = self.machine(); _ = m.start(sessionToken: "t", now: 0); return m }),
            ("awaitingWelcome", { var m = self.machine(); _ = m.start(sessionToken: "t", now: 0); _ = m.socketOpened(id: 1, now: 0); return m }),
            ("connected", { self.connected() }),
            ("backingOff", { var m = self.connected(); _ = m.socketClosed(id: 1, code: 1006, reason: "", now: 0); return m }),
            ("stopped", { var m = self.connected(); _ = m.stop(now: 0); return m }),
        ]
        for phase in phases {
            for frame in frames {
                var m = phase.make()
                let before = m.phase
                let actions = m.received(frame.text, id: 1, now: 1)
                let context = "\(frame.name) in \(phase.name)"
                switch (phase.name, frame.name) {
                case ("awaitingWelcome", "welcome"):
                    XCTAssertEqual(m.phase, .connected, context)
                    XCTAssertEqual(actions.first, .stateChanged(.connected(userId: "u1")), context)
                case ("connected", "message"), ("connected", "receipt"), ("connected", "call.incoming"), ("connected", "presence"),
                     ("connected", "typing"), ("connected", "call.candidates"), ("connected", "custom queued"):
                    XCTAssertEqual(delivered(actions).count, 1, context)
                    XCTAssertEqual(m.phase, .connected, context)
                default:
                    XCTAssertEqual(actions, [], context)
                    XCTAssertEqual(m.phase, before, context)
                }
            }
        }
        // Frames of an older connection are ignored whatever they say.
        var m = connected()
        _ = m.socketClosed(id: 1, code: 1006, reason: "", now: 0)
        _ = m.tick(now: 10_000)
        XCTAssertEqual(m.connectionID, 2)
        XCTAssertEqual(m.received(message(seq: 1, id: "m1"), id: 1, now: 10_001), [])
        XCTAssertEqual(m.socketClosed(id: 1, code: 4001, reason: "", now: 10_002), [])
        XCTAssertEqual(m.phase, .connecting)
    }

    func testParsedEventsCarryTheirFields() {
        XCTAssertEqual(ServerEvent.parse(message(seq: 9, id: "m9", text: "yo")),
                       .queued(seq: 9, .message(ChatMessage(messageId: "m9", from: "u2", to: ["u1"], text: "yo", sentAt: "2026-11-30T07:26:04.574Z"))))
        XCTAssertEqual(ServerEvent.parse(receipt(seq: 3, kind: "read", id: "m1")),
                       .queued(seq: 3, .receipt(Receipt(kind: .read, messageId: "m1", userId: "u2", at: "2026-11-30T07:26:04.585Z"))))
        XCTAssertEqual(ServerEvent.parse("{\"type\":\"presence\",\"userId\":\"u2\",\"online\":false,\"lastSeenAt\":\"2026-11-30T07:26:04.612Z\"}"),
                       .live(.presence(Presence(userId: "u2", online: false, lastSeenAt: "2026-11-30T07:26:04.612Z"))))
        XCTAssertEqual(ServerEvent.parse(welcome(lastSeq: 3, gap: true, reset: true)),
                       .welcome(userId: "u1", deviceId: "dev-1", lastSeq: 3, gap: true, reset: true))
        XCTAssertNil(ServerEvent.parse("{\"type\":\"receipt\",\"seq\":1,\"kind\":\"seen\",\"messageId\":\"m\",\"userId\":\"u\"}"))
        XCTAssertNil(ServerEvent.parse("{\"type\":\"call.ended\"}"), "a call event needs its callId")
    }

    // MARK: Outbox

    func testSendsArePersistedFirstThenSentOnceAndRemovedOnOk() throws {
        var m = connected()
        let first = try m.enqueue(OutgoingMessage(to: ["u2"], text: "a"), clientMessageId: "c1", now: 1)
        XCTAssertEqual(first, [.persistOutbox([OutboxEntry(clientMessageId: "c1", message: OutgoingMessage(to: ["u2"], text: "a"))])])
        // A second send while the first batch is being stored waits and is stored in the next batch.
        XCTAssertEqual(try m.enqueue(OutgoingMessage(to: ["u2"], text: "b"), clientMessageId: "c2", now: 2), [])
        XCTAssertEqual(try m.enqueue(OutgoingMessage(to: ["u2"], text: "c", headers: ["k": 1]), clientMessageId: "c3", now: 2), [])
        let stored = m.outboxPersisted(now: 3)
        XCTAssertEqual(stored.first, .outboxStored(["c1"]))
        XCTAssertTrue(stored.contains(.persistOutbox([
            OutboxEntry(clientMessageId: "c2", message: OutgoingMessage(to: ["u2"], text: "b")),
            OutboxEntry(clientMessageId: "c3", message: OutgoingMessage(to: ["u2"], text: "c", headers: ["k": 1])),
        ])))
        XCTAssertEqual(sends(stored), [["type": "message.send", "id": 1, "clientMessageId": "c1", "to": ["u2"], "text": "a"]])
        let next = m.outboxPersisted(now: 4)
        XCTAssertEqual(sends(next).map { $0["clientMessageId"] }, ["c2", "c3"])
        XCTAssertEqual(sends(next).last?["headers"], ["k": 1])

        let ok = m.received("{\"type\":\"ok\",\"re\":1,\"messageId\":\"m-1\",\"sentAt\":\"2026-11-30T07:26:04.574Z\",\"failed\":[{\"userId\":\"ghost\",\"reason\":\"user_not_found\"}]}", id: 1, now: 5)
        XCTAssertEqual(ok, [.removeFromOutbox(["c1"]), .sendFinished(clientMessageId: "c1", .success(SentMessage(
            clientMessageId: "c1", messageId: "m-1", sentAt: "2026-11-30T07:26:04.574Z",
            failed: [FailedRecipient(userId: "ghost", reason: "user_not_found")], duplicate: false)))])
        XCTAssertEqual(m.outbox.map(\.clientMessageId), ["c2", "c3"])
        // A late duplicate ok for the same request changes nothing.
        XCTAssertEqual(m.received("{\"type\":\"ok\",\"re\":1}", id: 1, now: 6), [])
    }

    func testAtMostMaxSendsInFlightAndTheRestFollowsAsAnswersArrive() throws {
        var m = connected()
        for index in 0..<5 { _ = try m.enqueue(OutgoingMessage(to: ["u2"], text: "\(index)"), clientMessageId: "c\(index)", now: 0) }
        var out = sends(m.outboxPersisted(now: 0))
        out += sends(m.outboxPersisted(now: 0))
        XCTAssertEqual(out.map { $0["clientMessageId"] }, ["c0", "c1", "c2"], "three in flight")
        let after = sends(m.received("{\"type\":\"ok\",\"re\":2,\"messageId\":\"x\",\"sentAt\":\"t\"}", id: 1, now: 1))
        XCTAssertEqual(after.map { $0["clientMessageId"] }, ["c3"])
    }

    func testRetryableErrorsAreSentAgainLaterAndFinalErrorsFailTheSend() throws {
        var m = connected()
        _ = try m.enqueue(OutgoingMessage(to: ["u2"], text: "a"), clientMessageId: "c1", now: 0)
        _ = try m.enqueue(OutgoingMessage(to: ["u2"], text: "b"), clientMessageId: "c2", now: 0)
        _ = m.outboxPersisted(now: 0)
        _ = m.outboxPersisted(now: 0)
        XCTAssertEqual(m.received("{\"type\":\"error\",\"re\":1,\"code\":\"rate_limited\",\"error\":\"slow down\"}", id: 1, now: 10), [])
        XCTAssertEqual(m.nextDeadline, 10 + m.configuration.sendRetryMilliseconds)
        XCTAssertEqual(sends(m.tick(now: 500)), [], "not before the retry delay")
        XCTAssertEqual(sends(m.tick(now: 1010)).map { $0["clientMessageId"] }, ["c1"], "the same clientMessageId again")
        let final = m.received("{\"type\":\"error\",\"re\":2,\"code\":\"text_too_long\",\"error\":\"too long\"}", id: 1, now: 1011)
        XCTAssertEqual(final, [.removeFromOutbox(["c2"]), .sendFinished(clientMessageId: "c2", .failure(.server(code: "text_too_long", message: "too long")))])
        for code in ["rate_limited", "unavailable", "too_many_pending", "internal"] { XCTAssertTrue(Machine.isRetryable(code), code) }
        for code in ["bad_request", "user_not_found", "too_many_recipients", "headers_too_large"] { XCTAssertFalse(Machine.isRetryable(code), code) }
    }

    func testInFlightSendsGoOutAgainAfterAReconnectWithTheSameClientMessageId() throws {
        var m = connected()
        _ = try m.enqueue(OutgoingMessage(to: ["u2"], text: "a"), clientMessageId: "c1", now: 0)
        XCTAssertEqual(sends(m.outboxPersisted(now: 0)).count, 1)
        let dropped = m.socketClosed(id: 1, code: 1006, reason: "gone", now: 100)
        XCTAssertTrue(dropped.contains { if case .stateChanged(.waitingToReconnect) = $0 { true } else { false } })
        XCTAssertTrue(sends(dropped).isEmpty)
        let deadline = try XCTUnwrap(m.nextDeadline)
        XCTAssertEqual(m.tick(now: deadline), [.openConnection(id: 2), .stateChanged(.connecting)])
        _ = m.socketOpened(id: 2, now: deadline)
        let resent = sends(m.received(welcome(), id: 2, now: deadline))
        XCTAssertEqual(resent.map { $0["clientMessageId"] }, ["c1"])
        XCTAssertEqual(resent.first?["id"], 2, "request ids keep growing")
    }

    func testAThousandsLongOutboxDrainsInOrderWithRetriesAndReconnects() throws {
        var m = connected { $0.maxOutboxEntries = 5000; $0.maxSendsInFlight = 100 }
        for index in 0..<3000 { _ = try m.enqueue(OutgoingMessage(to: ["u2"], text: "\(index)"), clientMessageId: "c\(index)", now: 0) }
        var inFlight: [(id: Int64, text: String)] = []
        func collect(_ actions: [Action]) {
            for frame in sends(actions) where frame["type"] == "message.send" { inFlight.append((frame["id"]!.int!, frame["text"]!.string!)) }
        }
        collect(m.outboxPersisted(now: 0))
        collect(m.outboxPersisted(now: 0))
        var acknowledged: [String] = []
        var now: Int64 = 1
        var reconnected = false
        while !inFlight.isEmpty {
            let (id, text) = inFlight.removeFirst()
            if text == "1500" && !reconnected {
                // The connection drops here: everything in flight goes out again, in order.
                reconnected = true
                _ = m.socketClosed(id: m.connectionID, code: 1006, reason: "", now: now)
                now = m.nextDeadline!
                _ = m.tick(now: now)
                _ = m.socketOpened(id: m.connectionID, now: now)
                inFlight = []
                collect(m.received(welcome(), id: m.connectionID, now: now))
                continue
            }
            if text == "2000" && !acknowledged.contains("1999-retried") {
                acknowledged.append("1999-retried")
                collect(m.received("{\"type\":\"error\",\"re\":\(id),\"code\":\"unavailable\",\"error\":\"busy\"}", id: m.connectionID, now: now))
                now += 1000
                collect(m.tick(now: now))
                continue
            }
            acknowledged.append(text)
            collect(m.received("{\"type\":\"ok\",\"re\":\(id),\"messageId\":\"m\(text)\",\"sentAt\":\"t\"}", id: m.connectionID, now: now))
            now += 1
        }
        acknowledged.removeAll { $0 == "1999-retried" }
        XCTAssertEqual(Set(acknowledged).count, 3000)
        XCTAssertEqual(acknowledged.count, 3000)
        XCTAssertEqual(m.outbox, [])
        XCTAssertEqual(m.outboxCount, 0)
    }

    func testStoredOutboxEntriesAreSentAfterTheFirstWelcome() {
        let stored = ParleyStoredState(outbox: [OutboxEntry(clientMessageId: "old", message: OutgoingMessage(to: ["u2"], text: "from before"))])
        var m = machine(stored: stored)
        _ = m.start(sessionToken: "t", now: 0)
        _ = m.socketOpened(id: 1, now: 0)
        XCTAssertEqual(sends(m.received(welcome(), id: 1, now: 0)).map { $0["text"] }, ["from before"])
    }

    func testOutboxBoundsAndArgumentChecks() throws {
        var m = machine { $0.maxOutboxEntries = 2 }
        _ = try m.enqueue(OutgoingMessage(to: ["u"], text: "1"), clientMessageId: "a", now: 0)
        _ = try m.enqueue(OutgoingMessage(to: ["u"], text: "2"), clientMessageId: "b", now: 0)
        XCTAssertThrowsError(try m.enqueue(OutgoingMessage(to: ["u"], text: "3"), clientMessageId: "c", now: 0)) {
            XCTAssertEqual($0 as? ParleyError, .outboxFull)
        }
        var n = machine()
        XCTAssertThrowsError(try n.enqueue(OutgoingMessage(to: [], text: "x"), clientMessageId: "a", now: 0))
        XCTAssertThrowsError(try n.enqueue(OutgoingMessage(to: Array(repeating: "u", count: 101), text: "x"), clientMessageId: "a", now: 0))
        XCTAssertThrowsError(try n.enqueue(OutgoingMessage(to: ["u"], text: String(repeating: "x", count: 65_537)), clientMessageId: "a", now: 0))
        XCTAssertThrowsError(try n.enqueue(OutgoingMessage(to: ["u"], text: "x"), clientMessageId: String(repeating: "c", count: 129), now: 0))
    }

    func testAFailedOutboxWriteFailsItsSends() throws {
        var m = connected()
        _ = try m.enqueue(OutgoingMessage(to: ["u"], text: "1"), clientMessageId: "a", now: 0)
        let error = ParleyError.storage(operation: "write", errno: 28)
        XCTAssertEqual(m.outboxPersistFailed(error, now: 1), [.sendFinished(clientMessageId: "a", .failure(error))])
        XCTAssertEqual(m.outbox, [])
    }

    // MARK: Dedupe and the cursor

    func testEventsAreDeliveredOnceAndAcknowledgedInBatchesAfterTheCursorIsStored() throws {
        var m = connected()
        XCTAssertEqual(delivered(m.received(message(seq: 1, id: "m1"), id: 1, now: 1)).count, 1)
        XCTAssertEqual(m.received(message(seq: 1, id: "m1"), id: 1, now: 1), [], "the same seq again is ignored")
        XCTAssertEqual(delivered(m.received(message(seq: 2, id: "m2"), id: 1, now: 1)).count, 1)
        XCTAssertEqual(delivered(m.received(message(seq: 3, id: "m1"), id: 1, now: 1)), [], "the same messageId under a new seq is a duplicate")
        XCTAssertEqual(m.pendingEvents, 2)
        // Nothing is acknowledged before the app processed the events.
        XCTAssertEqual(m.nextDeadline, 25_001, "only the ping timer (25 s after the last frame)")
        XCTAssertEqual(m.eventProcessed(now: 2), [])
        XCTAssertEqual(m.nextDeadline, 102, "the ack delay started")
        // The second processed event also passes the skipped seq 3: a batch of 3 is full.
        let full = m.eventProcessed(now: 3)
        XCTAssertEqual(full, [.persistCursor(CursorRecord(seq: 3, recentKeys: ["m:m1", "m:m2"]))])
        XCTAssertEqual(m.processedSeq, 3)
        XCTAssertEqual(m.storedSeq, 0)
        XCTAssertEqual(sends(m.cursorPersisted(3, now: 4)), [["type": "ack", "upTo": 3]])
        XCTAssertEqual(m.storedSeq, 3)

        // Below a full batch, the ack waits for the delay.
        _ = m.received(receipt(seq: 4, id: "m0"), id: 1, now: 10)
        XCTAssertEqual(m.eventProcessed(now: 10), [])
        XCTAssertEqual(m.tick(now: 50), [])
        XCTAssertEqual(m.tick(now: 110), [.persistCursor(CursorRecord(seq: 4, recentKeys: ["m:m1", "m:m2", "r:delivered:m0:u2"]))])
        XCTAssertEqual(sends(m.cursorPersisted(4, now: 111)), [["type": "ack", "upTo": 4]])
        // A receipt is a duplicate by message, user and kind; another user's is not.
        XCTAssertEqual(delivered(m.received(receipt(seq: 5, id: "m0"), id: 1, now: 120)), [])
        XCTAssertEqual(delivered(m.received(receipt(seq: 6, id: "m0", user: "u3"), id: 1, now: 120)).count, 1)
        XCTAssertEqual(delivered(m.received(receipt(seq: 7, kind: "read", id: "m0"), id: 1, now: 120)).count, 1)
    }

    func testAfterAReconnectHelloResumesFromTheProcessedSeqAndOlderEventsAreIgnored() {
        var m = connected()
        _ = m.received(message(seq: 1, id: "m1"), id: 1, now: 0)
        _ = m.received(message(seq: 2, id: "m2"), id: 1, now: 0)
        _ = m.eventProcessed(now: 0)
        _ = m.socketClosed(id: 1, code: 1001, reason: "shutdown", now: 0)
        _ = m.tick(now: 60_000)
        XCTAssertEqual(sends(m.socketOpened(id: 2, now: 60_000)).first?["resumeAfter"], 1)
        _ = m.received(welcome(lastSeq: 2), id: 2, now: 60_000)
        // The replay brings seq 2 again: it is still with the app, so it is not delivered twice.
        XCTAssertEqual(m.received(message(seq: 2, id: "m2"), id: 2, now: 60_001), [])
        XCTAssertEqual(m.pendingEvents, 1)
    }

    func testStoredDedupeKeysSurviveARestart() {
        let stored = ParleyStoredState(cursor: CursorRecord(seq: 10, recentKeys: ["m:m10"]))
        var m = connected(stored: stored)
        // After a crash between processing and storing, the replay brings an event the app saw.
        XCTAssertEqual(delivered(m.received(message(seq: 11, id: "m10"), id: 1, now: 0)), [])
        XCTAssertEqual(m.processedSeq, 11, "a skipped duplicate still moves the cursor")
        XCTAssertEqual(m.received(message(seq: 9, id: "old"), id: 1, now: 0), [], "below the cursor")
    }

    func testResetStartsTheCursorOverAndKeepsTheDedupeKeys() {
        var m = machine(stored: ParleyStoredState(cursor: CursorRecord(seq: 500, recentKeys: ["m:m1"])))
        _ = m.start(sessionToken: "t", now: 0)
        _ = m.socketOpened(id: 1, now: 0)
        let actions = m.received(welcome(lastSeq: 3, reset: true), id: 1, now: 0)
        XCTAssertTrue(actions.contains(.persistCursor(CursorRecord(seq: 0, recentKeys: ["m:m1"]))))
        XCTAssertTrue(sends(actions).isEmpty, "no ack of a seq from another life")
        XCTAssertEqual(delivered(m.received(message(seq: 1, id: "m1"), id: 1, now: 0)), [], "already seen")
        XCTAssertEqual(delivered(m.received(message(seq: 2, id: "m2"), id: 1, now: 0)).count, 1)
        _ = m.cursorPersisted(0, now: 0)
        _ = m.eventProcessed(now: 0)
        XCTAssertEqual(m.processedSeq, 2)
    }

    func testGapIsReported() {
        var m = machine()
        _ = m.start(sessionToken: "t", now: 0)
        _ = m.socketOpened(id: 1, now: 0)
        XCTAssertTrue(m.received(welcome(gap: true), id: 1, now: 0).contains(.gap))
    }

    func testReadingPausesWhenTheAppFallsBehindAndResumes() {
        var m = connected()
        var actions: [Action] = []
        for seq in 1...16 { actions += m.received(message(seq: Int64(seq), id: "m\(seq)"), id: 1, now: 0) }
        XCTAssertEqual(actions.filter { $0 == .pauseReading }.count, 1)
        var resumed: [Action] = []
        for _ in 0..<8 { resumed += m.eventProcessed(now: 0) }
        XCTAssertTrue(resumed.contains(.resumeReading))
    }

    // MARK: Close codes, timers, backoff

    func testCloseCodesThatStopForGoodAndOnesThatReconnect() {
        let stops: [(Int, ParleyError)] = [(4001, .replaced), (4002, .protocolViolation("bad hello")), (4004, .invalidSession),
                                           (4005, .tooManyDevices), (4006, .sessionRevoked), (1015, .tls("bad hello"))]
        for (code, error) in stops {
            var m = connected()
            let actions = m.socketClosed(id: 1, code: code, reason: "bad hello", now: 0)
            XCTAssertEqual(actions.last, .stateChanged(.stopped(error)), "\(code)")
            XCTAssertEqual(m.tick(now: 1_000_000), [], "no reconnect after \(code)")
            XCTAssertNil(m.nextDeadline)
        }
        for code in [1000, 1001, 1006, 1009, 1011, 1012, 1013, 4003] {
            var m = connected()
            let actions = m.socketClosed(id: 1, code: code, reason: "", now: 0)
            XCTAssertTrue(actions.contains { if case .stateChanged(.waitingToReconnect) = $0 { true } else { false } }, "\(code)")
        }
        // After invalidSession, the app logs in again and starts with the new token.
        var m = connected()
        _ = m.socketClosed(id: 1, code: 4004, reason: "", now: 0)
        XCTAssertEqual(m.start(sessionToken: "r:new", now: 1), [.openConnection(id: 2), .stateChanged(.connecting)])
        XCTAssertEqual(sends(m.socketOpened(id: 2, now: 1)).first?["sessionToken"], "r:new")
    }

    func testPendingRequestsFailWhenTheConnectionDrops() {
        var m = connected()
        _ = m.request(type: "call.invite", fields: ["callId": "x"], token: 7, now: 0)
        XCTAssertEqual(m.socketClosed(id: 1, code: 1006, reason: "", now: 1).first, .requestFinished(token: 7, .failure(.notConnected)))
        XCTAssertEqual(m.request(type: "call.hangup", fields: [:], token: 8, now: 2), [.requestFinished(token: 8, .failure(.notConnected))])
    }

    func testRequestsAnswerWithTheirFields() {
        var m = connected()
        XCTAssertEqual(sends(m.request(type: "call.ringing", fields: ["callId": "x"], token: 3, now: 0)),
                       [["type": "call.ringing", "id": 1, "callId": "x"]])
        XCTAssertEqual(m.received("{\"type\":\"ok\",\"re\":1,\"callId\":\"x\"}", id: 1, now: 1),
                       [.requestFinished(token: 3, .success(["type": "ok", "re": 1, "callId": "x"]))])
        _ = m.request(type: "call.answer", fields: ["callId": "x"], token: 4, now: 2)
        XCTAssertEqual(m.received("{\"type\":\"error\",\"re\":2,\"code\":\"already_answered\",\"error\":\"no\"}", id: 1, now: 3),
                       [.requestFinished(token: 4, .failure(.server(code: "already_answered", message: "no")))])
    }

    func testPingsAQuietServerAndDropsADeadOne() throws {
        var m = connected()
        XCTAssertEqual(m.tick(now: 24_999), [])
        XCTAssertEqual(m.tick(now: 25_000), [.sendPing])
        XCTAssertEqual(m.tick(now: 26_000), [], "one ping per silence")
        m.socketActivity(id: 1, now: 30_000)
        XCTAssertEqual(m.nextDeadline, 55_000)
        XCTAssertEqual(m.tick(now: 55_000), [.sendPing])
        let dead = m.tick(now: 75_000)
        XCTAssertEqual(dead.first, .closeConnection(code: 1000, reason: "no frame or pong for 45000 ms"))
        XCTAssertEqual(m.phase, .backingOff)
    }

    func testRequestAndConnectTimeoutsDropTheConnection() {
        var m = connected()
        _ = m.markRead(["m1"], token: 1, now: 0)
        m.socketActivity(id: 1, now: 19_000)
        let timedOut = m.tick(now: 20_000)
        XCTAssertEqual(timedOut.first, .closeConnection(code: 1000, reason: "request timed out"))
        XCTAssertTrue(timedOut.contains(.requestFinished(token: 1, .failure(.notConnected))))
        var n = machine()
        _ = n.start(sessionToken: "t", now: 0)
        XCTAssertEqual(n.tick(now: 15_000).first, .closeConnection(code: 1000, reason: "connect timed out"))
    }

    func testBackoffDoublesToTheCapWithJitterAndResetsAfterWelcome() {
        let backoff = ReconnectBackoff(baseMilliseconds: 500, capMilliseconds: 30_000)
        XCTAssertEqual((0..<9).map { backoff.ceiling(attempt: $0) }, [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000])
        var random = SplitMix64(seed: 1)
        for attempt in 0..<20 {
            let delay = backoff.delay(attempt: attempt, random: &random)
            let ceiling = backoff.ceiling(attempt: attempt)
            XCTAssertTrue(delay >= ceiling / 2 && delay <= ceiling, "\(delay) for \(ceiling)")
        }
        var one = SplitMix64(seed: 1), two = SplitMix64(seed: 1)
        XCTAssertEqual(backoff.delay(attempt: 3, random: &one), backoff.delay(attempt: 3, random: &two), "deterministic for a seed")

        var m = connected()
        var delays: [Int64] = []
        var now: Int64 = 0
        for id in 1...4 {
            let actions = m.socketClosed(id: id, code: 1006, reason: "", now: now)
            for case .stateChanged(.waitingToReconnect(let delay)) in actions { delays.append(delay) }
            now = m.nextDeadline!
            _ = m.tick(now: now)
            if id < 4 { _ = m.socketOpened(id: id + 1, now: now) }
        }
        XCTAssertEqual(delays.count, 4)
        for (attempt, delay) in delays.enumerated() {
            XCTAssertTrue(delay <= m.configuration.backoff.ceiling(attempt: attempt) && delay >= m.configuration.backoff.ceiling(attempt: attempt) / 2)
        }
        _ = m.socketOpened(id: 5, now: now)
        _ = m.received(welcome(), id: 5, now: now)
        let afterWelcome = m.socketClosed(id: 5, code: 1006, reason: "", now: now)
        for case .stateChanged(.waitingToReconnect(let delay)) in afterWelcome { XCTAssertLessThanOrEqual(delay, 500, "attempts start over") }
    }

    // MARK: Requests that outlive connections

    func testMarkReadIsHeldOfflineAndPresenceIsResubscribedAfterReconnect() {
        var m = machine()
        XCTAssertEqual(m.markRead(["m1", "m2"], token: 9, now: 0), [])
        XCTAssertEqual(m.subscribePresence(["u2", "u3"], token: 10, now: 0), [.requestFinished(token: 10, .success([:]))])
        _ = m.start(sessionToken: "t", now: 0)
        _ = m.socketOpened(id: 1, now: 0)
        let frames = sends(m.received(welcome(), id: 1, now: 0))
        XCTAssertEqual(frames, [["type": "presence.subscribe", "id": 1, "users": ["u2", "u3"]],
                                ["type": "message.read", "id": 2, "messageIds": ["m1", "m2"]]])
        XCTAssertEqual(m.received("{\"type\":\"ok\",\"re\":2}", id: 1, now: 1), [.requestFinished(token: 9, .success(["type": "ok", "re": 2]))])
        _ = m.unsubscribePresence(["u2"], token: nil, now: 2)
        _ = m.socketClosed(id: 1, code: 1006, reason: "", now: 3)
        _ = m.tick(now: 10_000)
        _ = m.socketOpened(id: 2, now: 10_000)
        XCTAssertEqual(sends(m.received(welcome(), id: 2, now: 10_000)), [["type": "presence.subscribe", "id": 4, "users": ["u3"]]])
        XCTAssertEqual(m.typing(to: "u2", active: true).count, 1)
        var offline = machine()
        XCTAssertEqual(offline.typing(to: "u2", active: true), [], "typing is dropped offline")
    }

    func testStopClosesAndStoresTheCursorIfBehind() {
        var m = connected()
        _ = m.received(message(seq: 1, id: "m1"), id: 1, now: 0)
        _ = m.eventProcessed(now: 0)
        let actions = m.stop(now: 1)
        XCTAssertEqual(actions, [.closeConnection(code: 1000, reason: "client stopped"), .stateChanged(.stopped(nil)),
                                 .persistCursor(CursorRecord(seq: 1, recentKeys: ["m:m1"]))])
        XCTAssertNil(m.nextDeadline)
    }
}
