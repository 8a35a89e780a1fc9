import ParleyHTTP
import ParleyJSON
import ParleyNet
@testable import ParleyPush
import XCTest

/// Notification building, gateway answers, backoff and configuration without a database.
final class PushUnitTests: XCTestCase {
    private let configuration = PushConfiguration(bundleID: "com.example.app", previewLength: 10)

    func testMessageNotificationForIOS() {
        let job = PushJob(id: 42, kind: .message, userId: "bob", deviceId: "phone", platform: .ios, token: "tok", collapseKey: "conv",
                          seq: 7, sender: "alice", senderName: "Alice", messageId: "m1", messageText: "a long message text", messageCount: 3)
        let notification = GorushNotification.build(job, configuration: configuration)
        XCTAssertEqual(notification["notif_id"], "42")
        XCTAssertEqual(notification["tokens"], ["tok"])
        XCTAssertEqual(notification["platform"], 1)
        XCTAssertEqual(notification["title"], "Alice")
        XCTAssertEqual(notification["message"], "a long mes…")
        XCTAssertEqual(notification["topic"], "com.example.app")
        XCTAssertEqual(notification["push_type"], "alert")
        XCTAssertEqual(notification["collapse_id"], "conv")
        XCTAssertEqual(notification["data"], ["type": "message", "conversation": "conv", "count": 3, "messageId": "m1", "from": "alice"])
        var hidden = configuration
        hidden.messagePreview = false
        XCTAssertEqual(GorushNotification.build(job, configuration: hidden)["message"], "New message")
    }

    func testCallNotificationForIOSAndAndroid() {
        var job = PushJob(id: 9, kind: .call, userId: "bob", deviceId: "phone", platform: .ios, token: "voip", collapseKey: "call:c",
                          sender: "alice", senderName: "Alice", callId: "c",
                          callPayload: ["callId": "c", "from": "alice", "video": true, "headers": ["k": "v"]], expiresAt: 1_700_000_000_500)
        let ios = GorushNotification.build(job, configuration: configuration)
        XCTAssertEqual(ios["push_type"], "voip")
        XCTAssertEqual(ios["topic"], "com.example.app.voip")
        XCTAssertEqual(ios["priority"], "high")
        XCTAssertEqual(ios["expiration"], 1_700_000_000)
        XCTAssertNil(ios["message"])
        XCTAssertEqual(ios["data"], ["type": "call", "callId": "c", "from": "alice", "video": true, "callerName": "Alice",
                                     "headers": ["k": "v"], "expiresAt": "2023-11-14T22:13:20.500Z"])
        job.platform = .android
        let android = GorushNotification.build(job, configuration: configuration)
        XCTAssertNil(android["push_type"])
        XCTAssertEqual(android["data"]?["video"], "true")
        XCTAssertEqual(android["data"]?["headers"], "{\"k\":\"v\"}")
    }

    func testGorushResponseMapsFailuresToJobs() throws {
        let body = #"{"counts":3,"logs":[{"type":"failed-push","platform":"ios","token":"","message":"x","error":"BadDeviceToken","notif_id":"2"},{"type":"failed-push","token":"tok-3","error":"Unregistered"},{"type":"succeeded-push","token":"tok-1"}],"success":"ok"}"#
        let response = try XCTUnwrap(GorushResponse.parse(Array(body.utf8)))
        XCTAssertEqual(response.counts, 3)
        XCTAssertEqual(response.failures.count, 2)
        let jobs = (1...3).map { PushJob(id: Int64($0), kind: .message, userId: "u", deviceId: "d", platform: .ios, token: "tok-\($0)", collapseKey: "k") }
        XCTAssertEqual(response.failuresByJob(jobs), [2: "BadDeviceToken", 3: "Unregistered"])
        XCTAssertNil(GorushResponse.parse(Array("not json".utf8)))
        XCTAssertEqual(GorushResponse.parse(Array(#"{"counts":1,"logs":[],"success":"ok"}"#.utf8))?.failures, [])
    }

    func testBackoffDoublesWithJitterInTheUpperHalf() {
        let backoff = RetryBackoff(base: .seconds(2), max: .seconds(60))
        var generator = SystemRandomNumberGenerator()
        for attempt in 1...10 {
            let nominal = min(2.0 * Double(1 << (attempt - 1)), 60)
            for _ in 0..<50 {
                let delay = backoff.delay(afterAttempt: attempt, using: &generator)
                let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
                XCTAssertGreaterThanOrEqual(seconds, nominal / 2 - 1e-9)
                XCTAssertLessThanOrEqual(seconds, nominal + 1e-9)
            }
        }
        XCTAssertLessThanOrEqual(backoff.delay(afterAttempt: 1000), .seconds(60))
    }

    func testInvalidTokenErrorsAreRecognised() async throws {
        let group = try ParleyNet.EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        for error in ["BadDeviceToken", "Unregistered", "rpc error: registration-token-not-registered", "Requested entity was not found."] {
            XCTAssertTrue(configuration.invalidTokenErrors.contains { error.lowercased().contains($0.lowercased()) }, error)
        }
        for error in ["TooManyRequests", "InternalServerError", "gateway: timed out", "max capacity reached"] {
            XCTAssertFalse(configuration.invalidTokenErrors.contains { error.lowercased().contains($0.lowercased()) }, error)
        }
    }

    func testGatewayURLGetsTheAPIPath() throws {
        let group = try ParleyNet.EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let client = HTTPClient(group: group)
        XCTAssertEqual(GorushGateway(client: client, gateway: HTTPClientURL("http://gorush:8088")!, timeout: .seconds(1)).url.description,
                       "http://gorush:8088/api/push")
        XCTAssertEqual(GorushGateway(client: client, gateway: HTTPClientURL("http://gw/prefix/")!, timeout: .seconds(1)).url.target,
                       "/prefix/api/push")
    }

    func testLeaseOutlastsTheRequestTimeout() {
        let configuration = PushConfiguration(requestTimeout: .seconds(10))
        XCTAssertEqual(configuration.lease, .seconds(25))
    }

    func testWorkerConnectionsCommitAsynchronously() {
        XCTAssertEqual(PushService.workerConnectionString("host=127.0.0.1 dbname=x"),
                       "host=127.0.0.1 dbname=x options='-c synchronous_commit=off -c enable_bitmapscan=off'")
        XCTAssertEqual(PushService.workerConnectionString("postgresql://u@h/db"),
                       "postgresql://u@h/db?options=-c%20synchronous_commit%3Doff%20-c%20enable_bitmapscan%3Doff")
        XCTAssertEqual(PushService.workerConnectionString("postgres://u@h/db?sslmode=disable"),
                       "postgres://u@h/db?sslmode=disable&options=-c%20synchronous_commit%3Doff%20-c%20enable_bitmapscan%3Doff")
        XCTAssertNil(PushService.workerConnectionString("host=h options='-c x=y'"))
    }
}
