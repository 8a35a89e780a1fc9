import Foundation
import ParleyJSON
import ParleyPostgres
@testable import ParleyPush
@testable import ParleyRealtime
import XCTest

/// Push jobs end to end without sockets to clients: messages and calls queued through the
/// realtime layer, jobs created by PostgreSQL, the worker sending to a gorush sink over HTTP.
final class PushDeliveryTests: XCTestCase {
    func testOfflineRecipientGetsOneCollapsedAlertPerConversationBurst() async throws {
        let env = try await PushTestEnvironment { $0.titleField = "screenName" }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001", data: #"{"screenName":"Alice A."}"#)
        try await env.makeUser("bob0000001")
        try await env.makeUser("carol00001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-apns-token")
        // Alice's own second device, offline with a token: her own messages never push to it.
        try await env.makeInstallation("alice-ipad", user: "alice00001", token: "alice-apns-token")

        // A burst of 50 messages from Alice and 3 from Carol, sent concurrently over both loops.
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for i in 0..<50 {
                tasks.addTask { _ = try await env.send("hello \(i)", from: "alice00001", to: ["bob0000001"], loop: i % 2) }
            }
            for i in 0..<3 {
                tasks.addTask { _ = try await env.send("carol \(i)", from: "carol00001", to: ["bob0000001"], loop: i % 2) }
            }
            try await tasks.waitForAll()
        }
        try await env.waitUntil("both conversations are pushed") { sink.accepted.count >= 2 }
        // Every job was written with its message; once all are sent, no other push can come.
        try await env.waitUntil("every job is sent") { let jobs = try await env.jobs(); return !jobs.isEmpty && jobs.allSatisfy { $0.state == "sent" } }
        let pushes = sink.accepted
        XCTAssertEqual(pushes.count, 2, "one push per conversation: \(pushes.map(\.notification))")
        XCTAssertTrue(pushes.allSatisfy { $0.token == "bob-apns-token" })
        let fromAlice = try XCTUnwrap(pushes.first { $0.data["from"]?.string == "alice00001" })
        XCTAssertEqual(fromAlice.notification["title"]?.string, "Alice A.")
        XCTAssertEqual(fromAlice.notification["platform"]?.int, 1)
        XCTAssertEqual(fromAlice.notification["push_type"]?.string, "alert")
        XCTAssertEqual(fromAlice.notification["topic"]?.string, "com.example.chat")
        XCTAssertEqual(fromAlice.data["count"]?.int, 50)
        XCTAssertTrue(fromAlice.notification["message"]?.string?.hasPrefix("hello ") ?? false)
        let fromCarol = try XCTUnwrap(pushes.first { $0.data["from"]?.string == "carol00001" })
        XCTAssertEqual(fromCarol.notification["title"]?.string, "name-carol00001", "no screenName: the username")
        XCTAssertEqual(fromCarol.data["count"]?.int, 3)
        XCTAssertNotEqual(fromAlice.notification["collapse_id"], fromCarol.notification["collapse_id"])
        XCTAssertEqual(fromAlice.notification["thread-id"], fromAlice.notification["collapse_id"])
        let jobs = try await env.jobs()
        XCTAssertEqual(jobs.map(\.state), ["sent", "sent"])
        XCTAssertEqual(jobs.map(\.count).sorted(), [3, 50])

        // A later message after the push went out starts a new burst: one more push.
        _ = try await env.send("again", from: "alice00001", to: ["bob0000001"])
        try await env.waitUntil("the next burst is pushed") { sink.accepted.count == 3 }
        XCTAssertEqual(sink.accepted.last?.notification["message"]?.string, "again")
    }

    func testPreviewOffSaysNewMessage() async throws {
        let env = try await PushTestEnvironment { $0.messagePreview = false }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-android", user: "bob0000001", type: "android", token: "fcm-token")
        _ = try await env.send("secret text", from: "alice00001", to: ["bob0000001"])
        try await env.waitUntil("the push is sent") { sink.accepted.count == 1 }
        let push = try XCTUnwrap(sink.accepted.first)
        XCTAssertEqual(push.notification["message"]?.string, "New message")
        XCTAssertEqual(push.notification["platform"]?.int, 2)
        XCTAssertEqual(push.data["count"]?.string, "1", "FCM data values are strings")
        XCTAssertNotNil(push.notification["android"]?.object?["collapse_key"])
    }

    func testOnlineRecipientGetsNoPush() async throws {
        let env = try await PushTestEnvironment()
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-token", voipToken: "bob-voip")
        try await env.connect("bob0000001", "bob-phone")
        for i in 0..<5 { _ = try await env.send("hi \(i)", from: "alice00001", to: ["bob0000001"]) }
        _ = try await env.incomingCall("6F9619FF-8B86-D011-B42D-00C04FC964FF", from: "alice00001", to: "bob0000001")
        // A job would have been written in the transaction of each send; only jobs are pushed.
        let jobs = try await env.jobs()
        XCTAssertTrue(jobs.isEmpty, "no job for a connected device: \(jobs)")
        XCTAssertEqual(sink.received.count, 0)
    }

    func testOfflineCalleeGetsOneVoIPPushWithTheCallFields() async throws {
        let env = try await PushTestEnvironment()
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001", username: "alice")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-apns", voipToken: "bob-voip")
        try await env.makeInstallation("bob-pixel", user: "bob0000001", type: "android", token: "bob-fcm")
        let callId = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
        let headers: JSONObject = ["X-Display": "Alice", "x-app": .object(["room": 7])]
        let expiresAt = try await env.incomingCall(callId, from: "alice00001", to: "bob0000001", video: true, headers: headers)
        try await env.waitUntil("both devices are pushed") { sink.accepted.count == 2 }
        let voip = try XCTUnwrap(sink.accepted.first { $0.notification["platform"]?.int == 1 })
        XCTAssertEqual(voip.token, "bob-voip")
        XCTAssertEqual(voip.notification["push_type"]?.string, "voip")
        XCTAssertEqual(voip.notification["topic"]?.string, "com.example.chat.voip")
        XCTAssertEqual(voip.notification["priority"]?.string, "high")
        XCTAssertEqual(voip.notification["expiration"]?.int, expiresAt / 1000)
        XCTAssertNil(voip.notification["message"])
        XCTAssertEqual(voip.data["type"]?.string, "call")
        XCTAssertEqual(voip.data["callId"]?.string, callId)
        XCTAssertEqual(voip.data["from"]?.string, "alice00001")
        XCTAssertEqual(voip.data["callerName"]?.string, "alice")
        XCTAssertEqual(voip.data["video"]?.bool, true)
        XCTAssertEqual(voip.data["headers"]?.object, headers)
        let android = try XCTUnwrap(sink.accepted.first { $0.notification["platform"]?.int == 2 })
        XCTAssertEqual(android.token, "bob-fcm")
        XCTAssertEqual(android.data["callId"]?.string, callId)
        XCTAssertEqual(android.data["video"]?.string, "true")
        XCTAssertEqual(android.notification["priority"]?.string, "high")
        try await env.waitUntil("both jobs are sent") { let jobs = try await env.jobs(); return jobs.count == 2 && jobs.allSatisfy { $0.state == "sent" } }
        XCTAssertEqual(sink.received.count, 2, "exactly one push per device")
    }

    func testLargeCallHeadersAreLeftOut() async throws {
        let env = try await PushTestEnvironment()
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", voipToken: "bob-voip")
        _ = try await env.incomingCall("6F9619FF-8B86-D011-B42D-00C04FC964FF", from: "alice00001", to: "bob0000001",
                                       headers: ["big": .string(String(repeating: "x", count: 1100))])
        try await env.waitUntil("the call is pushed") { sink.accepted.count == 1 }
        XCTAssertEqual(sink.accepted.first?.data["headers"]?.object, JSONObject())
        XCTAssertEqual(sink.accepted.first?.data["headersOmitted"]?.bool, true)
    }

    func testCallEndedBeforeSendingSendsNothing() async throws {
        let env = try await PushTestEnvironment(start: false)
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", voipToken: "bob-voip")
        // Ended through the call.ended event queued for the offline device.
        let first = "11111111-8B86-D011-B42D-00C04FC964FF"
        _ = try await env.incomingCall(first, from: "alice00001", to: "bob0000001")
        try await env.endCall(first, callee: "bob0000001")
        // Ended through the call record (the trigger on calls).
        let second = "22222222-8B86-D011-B42D-00C04FC964FF"
        _ = try await env.incomingCall(second, from: "alice00001", to: "bob0000001")
        try await env.sql("""
            INSERT INTO calls (id, caller_id, caller_device, callee_id, video, state, started_at, ended_at, end_cause)
            VALUES ($1, 'alice00001', 'a', 'bob0000001', false, 'ended', now(), now(), 'canceled')
            """, [.text(second)])
        // Expired before the worker ran.
        let third = "33333333-8B86-D011-B42D-00C04FC964FF"
        _ = try await env.incomingCall(third, from: "alice00001", to: "bob0000001", expiresIn: .seconds(1))
        try await Task.sleep(for: .milliseconds(1100))
        env.push.start()
        try await env.waitUntil("every job is settled") { try await env.jobs().allSatisfy { $0.state != "pending" && $0.state != "sending" } }
        let jobs = try await env.jobs()
        XCTAssertEqual(jobs.map(\.state), ["canceled", "canceled", "expired"])
        XCTAssertEqual(sink.received.count, 0, "no job was ever sendable")
    }

    func testDeliveredBeforeThePushCancelsIt() async throws {
        let env = try await PushTestEnvironment { $0.collapseWindow = .milliseconds(800) }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-token")
        let sent = try await env.send("quick", from: "alice00001", to: ["bob0000001"])
        _ = sent
        // Bob's phone connects and acknowledges within the collapse window.
        let rows = try await env.sql("SELECT max(seq) AS seq FROM rt_queue WHERE user_id = 'bob0000001'")
        let seq = Int64(try XCTUnwrap(rows.first?["seq"].int))
        _ = try await env.realtime.queue.acknowledge([(key: .init(userId: "bob0000001", deviceId: "bob-phone"), upTo: seq)])
        try await env.waitUntil("the job is settled") { try await env.jobs().first?.state == "canceled" }
        XCTAssertEqual(sink.received.count, 0)
    }

    func testGatewayDownForFiveAttemptsThenUpDeliversOnceWithBackoff() async throws {
        let env = try await PushTestEnvironment { $0.maxAttempts = 8 }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        sink.configure { $0.failNext = 5 }
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", voipToken: "bob-voip")
        _ = try await env.incomingCall("6F9619FF-8B86-D011-B42D-00C04FC964FF", from: "alice00001", to: "bob0000001")
        try await env.waitUntil(timeout: .seconds(20), "the job is sent") { try await env.jobs().first?.state == "sent" }
        XCTAssertEqual(sink.received.count, 6)
        XCTAssertEqual(sink.accepted.count, 1, "delivered exactly once")
        let settled = try await env.jobs()
        let job = try XCTUnwrap(settled.first)
        XCTAssertEqual(job.attempts, 6)
        XCTAssertEqual(job.log.compactMap { $0["result"]?.string }, ["retry", "retry", "retry", "retry", "retry", "sent"])
        XCTAssertTrue(job.log.dropLast().allSatisfy { ($0["error"]?.string ?? "").contains("500") })
        // Attempt start times: the gaps grow (100 ms base doubling, jitter within the upper half).
        let times = job.log.compactMap { $0["at"]?.string.flatMap(UTCTimeParse.milliseconds) }
        XCTAssertEqual(times.count, 6)
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        for (index, gap) in gaps.enumerated() {
            let nominal = 100 << index
            XCTAssertGreaterThanOrEqual(gap, Int64(nominal / 2) - 5, "gap \(index) = \(gap) ms")
        }
        XCTAssertGreaterThan(gaps[4], gaps[0] * 3, "backoff grows: \(gaps)")
        let metrics = env.registry.render()
        XCTAssertTrue(metrics.contains("parley_push_failed_total 5"), metrics)
        XCTAssertTrue(metrics.contains("parley_push_sent_total 1"))
        XCTAssertTrue(metrics.contains("parley_push_gateway_requests_total{result=\"error\"} 5"))
        XCTAssertTrue(metrics.contains("parley_push_gateway_latency_seconds_count 6"))
    }

    func testDeadAfterMaxAttemptsThenRetryDeadResends() async throws {
        let env = try await PushTestEnvironment { $0.maxAttempts = 3 }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        sink.configure { $0.failAll = true }
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-token")
        _ = try await env.send("hello", from: "alice00001", to: ["bob0000001"])
        try await env.waitUntil("the job is dead") { try await env.jobs().first?.state == "dead" }
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(sink.received.count, 3, "no attempt after the last")
        let dead = try await env.jobs()
        XCTAssertEqual(dead.first?.attempts, 3)
        XCTAssertTrue(env.registry.render().contains("parley_push_dead_total 1"))

        sink.configure { $0.failAll = false }
        let output = OutputCapture()
        let code = await PushCLI.run(arguments: ["push", "retry", "--dead"], database: env.client, io: output.io)
        XCTAssertEqual(code, 0, output.errors)
        XCTAssertTrue(output.lines.first?.hasPrefix("retrying 1 job") ?? false, output.lines.description)
        try await env.waitUntil("the job is sent") { try await env.jobs().first?.state == "sent" }
        XCTAssertEqual(sink.accepted.count, 1)
        let resent = try await env.jobs()
        XCTAssertEqual(resent.first?.log.count, 4, "the attempt log keeps the dead attempts")
    }

    func testRejectedTokenIsRemovedFromItsInstallation() async throws {
        let env = try await PushTestEnvironment()
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        sink.configure { $0.rejectTokens = ["stale-token": "BadDeviceToken", "voip-gone": "Unregistered"] }
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "stale-token", voipToken: "voip-gone")
        try await env.makeInstallation("bob-tablet", user: "bob0000001", token: "good-token")
        _ = try await env.send("hello", from: "alice00001", to: ["bob0000001"])
        _ = try await env.incomingCall("6F9619FF-8B86-D011-B42D-00C04FC964FF", from: "alice00001", to: "bob0000001")
        try await env.waitUntil("every job is settled") {
            let jobs = try await env.jobs()
            return jobs.count == 3 && jobs.allSatisfy { $0.state != "pending" && $0.state != "sending" }
        }
        let states = try await env.sql("SELECT device_id, kind, state, last_error FROM push_jobs ORDER BY device_id, kind").map {
            "\($0["device_id"].string!) \($0["kind"].string!) \($0["state"].string!)"
        }
        XCTAssertEqual(states, ["bob-phone call rejected", "bob-phone message rejected", "bob-tablet message sent"])
        let tokens = try await env.sql("SELECT installation_id, device_token, voip_device_token FROM installations ORDER BY installation_id")
        XCTAssertEqual(tokens[0]["installation_id"].string, "bob-phone")
        XCTAssertNil(tokens[0]["device_token"].string)
        XCTAssertNil(tokens[0]["voip_device_token"].string)
        XCTAssertEqual(tokens[1]["device_token"].string, "good-token")
        XCTAssertTrue(env.registry.render().contains("parley_push_rejected_total 2"))
        // Without a token no new job is made for the phone.
        _ = try await env.send("again", from: "alice00001", to: ["bob0000001"])
        try await env.waitUntil("the tablet is pushed again") { sink.accepted.count == 2 }
        let all = try await env.jobs()
        XCTAssertEqual(all.count, 4)
    }

    func testWithoutGatewayJobsAreSkipped() async throws {
        let env = try await PushTestEnvironment(gateway: false)
        addTeardownBlock { await env.shutdown() }
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", token: "bob-token")
        _ = try await env.send("hello", from: "alice00001", to: ["bob0000001"])
        try await env.waitUntil("the job is skipped") { try await env.jobs().first?.state == "skipped" }
        XCTAssertTrue(env.registry.render().contains("parley_push_skipped_total 1"))
    }

    func testTwoNodesShareJobsWithoutSendingAnyTwice() async throws {
        let env = try await PushTestEnvironment(start: false) { $0.batchSize = 20 }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        try await env.sql("""
            INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, call_id, payload)
            SELECT 'call', 'u' || i, 'd' || i, 1, 'token-' || i, 'call:' || i, 'c' || i, '{"callId":"x","from":"y"}'
              FROM generate_series(1, 1000) i
            """)
        let other = PushService(database: env.client, group: env.group, configuration: env.push.configuration)
        env.push.start()
        other.start()
        defer { other.stop(timeout: .seconds(5)) }
        try await env.waitUntil(timeout: .seconds(30), "every job is sent") {
            try await env.sql("SELECT count(*) AS n FROM push_jobs WHERE state = 'sent'").first?["n"].int == 1000
        }
        let ids = sink.accepted.compactMap(\.jobID)
        XCTAssertEqual(ids.count, 1000)
        XCTAssertEqual(Set(ids).count, 1000, "no job sent twice")
        let nodes = try await env.sql("SELECT count(DISTINCT node_id) AS n FROM push_jobs").first?["n"].int
        XCTAssertEqual(nodes, 2, "both nodes took a share")
    }

    func testExpiredLeaseIsRecoveredAndSent() async throws {
        let env = try await PushTestEnvironment(start: false)
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        // A job a stopped node had claimed: its lease ran out.
        try await env.sql("""
            INSERT INTO push_jobs (kind, state, user_id, device_id, platform, token, collapse_key, call_id, payload,
                                   attempts, next_attempt_at, node_id)
            VALUES ('call', 'sending', 'u', 'd', 1, 'tok', 'call:1', 'c1', '{"callId":"c1","from":"x"}', 1,
                    now() - interval '1 second', 'deadnode')
            """)
        env.push.start()
        try await env.waitUntil("the job is sent") { try await env.jobs().first?.state == "sent" }
        let settled = try await env.jobs()
        let job = try XCTUnwrap(settled.first)
        XCTAssertEqual(job.attempts, 2)
        XCTAssertEqual(job.log.compactMap { $0["result"]?.string }, ["lost", "sent"])
        XCTAssertEqual(sink.accepted.count, 1)
    }

    func testSlowGatewayTimesOutAndIsRetried() async throws {
        let env = try await PushTestEnvironment { $0.requestTimeout = .milliseconds(300) }
        addTeardownBlock { await env.shutdown() }
        let sink = try XCTUnwrap(env.sink)
        sink.configure { $0.delay = .seconds(1) }
        try await env.makeUser("alice00001")
        try await env.makeUser("bob0000001")
        try await env.makeInstallation("bob-phone", user: "bob0000001", voipToken: "bob-voip")
        _ = try await env.incomingCall("6F9619FF-8B86-D011-B42D-00C04FC964FF", from: "alice00001", to: "bob0000001")
        try await env.waitUntil("a timeout is recorded") { try await env.jobs().first?.error?.contains("timed out") == true }
        sink.configure { $0.delay = .zero }
        try await env.waitUntil("the job is sent") { try await env.jobs().first?.state == "sent" }
    }
}

final class PushCLITests: XCTestCase {
    func testListAndRetry() async throws {
        let env = try await PushTestEnvironment(start: false)
        addTeardownBlock { await env.shutdown() }
        try await env.sql("""
            INSERT INTO push_jobs (kind, state, user_id, device_id, platform, token, collapse_key, call_id, attempts, last_error)
            VALUES ('call', 'dead', 'u1', 'phone-1', 1, 't1', 'call:a', 'a', 8, 'gateway answered 500'),
                   ('message', 'sent', 'u2', 'phone-2', 2, 't2', 'conv', NULL, 1, NULL),
                   ('message', 'pending', 'u2', 'phone-2', 2, 't2', 'conv', NULL, 0, NULL)
            """)
        let table = OutputCapture()
        var code = await PushCLI.run(arguments: ["push", "list"], database: env.client, io: table.io)
        XCTAssertEqual(code, 0)
        XCTAssertEqual(table.lines.first?.split(separator: " ", omittingEmptySubsequences: true).first, "ID")
        XCTAssertEqual(table.lines.count, 2 + 3 + 1, table.text)
        XCTAssertEqual(table.lines.last, "(3 jobs)")
        XCTAssertEqual(table.lines[2].split(separator: " ").prefix(5), ["3", "pending", "message", "u2", "phone-2"], table.text)

        let json = OutputCapture()
        code = await PushCLI.run(arguments: ["push", "list", "--state", "dead", "--json"], database: env.client, io: json.io)
        XCTAssertEqual(code, 0)
        let listed = try XCTUnwrap(try JSONParser().parse(json.text).array)
        XCTAssertEqual(listed.count, 1)
        XCTAssertEqual(listed[0]["state"], "dead")
        XCTAssertEqual(listed[0]["platform"], "ios")
        XCTAssertEqual(listed[0]["lastError"], "gateway answered 500")
        XCTAssertEqual(listed[0]["callId"], "a")

        let pending = OutputCapture()
        code = await PushCLI.run(arguments: ["push", "retry", "3"], database: env.client, io: pending.io)
        XCTAssertEqual(code, 1)
        XCTAssertTrue(pending.errors.contains("is pending"), pending.errors)
        let twin = OutputCapture()
        code = await PushCLI.run(arguments: ["push", "retry", "2"], database: env.client, io: twin.io)
        XCTAssertEqual(code, 1, "a pending job for the same conversation exists")
        XCTAssertTrue(twin.errors.contains("pending twin"), twin.errors)
        let missing = OutputCapture()
        code = await PushCLI.run(arguments: ["push", "retry", "99"], database: env.client, io: missing.io)
        XCTAssertEqual(code, 1)
        XCTAssertTrue(missing.errors.contains("no push job 99"))
        let retried = OutputCapture()
        code = await PushCLI.run(arguments: ["push", "retry", "1", "--json"], database: env.client, io: retried.io)
        XCTAssertEqual(code, 0, retried.errors)
        XCTAssertEqual(retried.text, #"{"retried":[1]}"#)
        let states = try await env.jobs().map { "\($0.state) \($0.attempts)" }
        XCTAssertEqual(states, ["pending 0", "sent 1", "pending 0"])

        for arguments in [["push"], ["push", "list", "extra"], ["push", "list", "--state", "weird"], ["push", "retry"],
                          ["push", "retry", "1", "--dead"], ["push", "list", "--limit", "0"], ["push", "list", "--bogus"]] {
            let usage = OutputCapture()
            let status = await PushCLI.run(arguments: arguments, database: env.client, io: usage.io)
            XCTAssertEqual(status, 2, "\(arguments)")
            XCTAssertTrue(usage.errors.contains("Usage:"), "\(arguments)")
        }
    }
}

/// Collects what a CLI command prints.
final class OutputCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var out: [String] = []
    private var err: [String] = []

    var io: PushCLI.IO {
        PushCLI.IO(output: { [self] text in lock.withLock { out.append(text) } },
                   error: { [self] text in lock.withLock { err.append(text) } })
    }

    var lines: [String] { lock.withLock { out.flatMap { $0.split(separator: "\n").map(String.init) } } }
    var text: String { lock.withLock { out.joined(separator: "\n") } }
    var errors: String { lock.withLock { err.joined(separator: "\n") } }
}

/// ISO-8601 text (`…T…Z` with milliseconds) to Unix milliseconds.
enum UTCTimeParse {
    static func milliseconds(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text).map { Int64($0.timeIntervalSince1970 * 1000) }
    }
}
