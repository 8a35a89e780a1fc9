import Foundation
import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres
@testable import ParleyPush
@testable import ParleyRealtime
import ParleyTestSupport
import XCTest

/// A fresh migrated database, loops, a realtime service whose observer is a push service, and
/// (unless `gateway` is false) a gorush sink the push service sends to.
final class PushTestEnvironment: @unchecked Sendable {
    let group: EventLoopGroup
    let client: PostgresClient
    let realtime: RealtimeService
    let push: PushService
    let sink: GorushSink?
    let registry = MetricsRegistry()
    let connectionString: String

    init(gateway: Bool = true, start: Bool = true, configure: (inout PushConfiguration) -> Void = { _ in }) async throws {
        connectionString = try TestPostgres.shared().makeDatabase(prefix: "push")
        let migrations = ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path
        _ = try Migrator(connectionString: connectionString, directory: migrations).migrate()
        group = try EventLoopGroup(threads: 2)
        client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: connectionString))
        client.start()
        try await client.waitUntilReady()
        sink = gateway ? try GorushSink() : nil
        var configuration = PushConfiguration(
            gatewayURL: sink.flatMap { HTTPClientURL($0.url) }, bundleID: "com.example.chat", collapseWindow: .milliseconds(300),
            batchSize: 50, concurrency: 2, maxAttempts: 4, backoffBase: .milliseconds(100), backoffMax: .seconds(2),
            requestTimeout: .seconds(2), pollInterval: .milliseconds(100))
        configure(&configuration)
        push = PushService(database: client, group: group, configuration: configuration, metrics: registry)
        realtime = RealtimeService(database: client, group: group, authenticator: NoSessions(), observer: push)
        if start { push.start() }
    }

    var store: PushJobStore { push.store }

    func shutdown() async {
        push.stop(timeout: .seconds(5))
        realtime.shutdown()
        await client.shutdown()
        group.shutdownGracefully()
    }

    @discardableResult
    func sql(_ text: String, _ params: [PostgresData] = []) async throws -> PostgresRows {
        try await client.query(text, params, prepared: false)
    }

    func makeUser(_ id: String, username: String? = nil, data: String = "{}") async throws {
        try await sql("INSERT INTO users (object_id, username, data) VALUES ($1, $2, $3::jsonb)",
                      [.text(id), .text(username ?? "name-" + id), .text(data)])
    }

    /// An installation linked to `user` (which makes it one of the user's devices, offline).
    func makeInstallation(_ installationId: String, user: String, type: String = "ios", token: String? = nil, voipToken: String? = nil) async throws {
        try await sql("""
            INSERT INTO installations (object_id, installation_id, device_type, device_token, voip_device_token, user_id)
            VALUES ($1, $2, $3, $4, $5, $6)
            """, [.text(String(installationId.prefix(10))), .text(installationId), .text(type),
                  token.map { .text($0) } ?? .null, voipToken.map { .text($0) } ?? .null, .text(user)])
    }

    /// Marks the device connected to this node (as a socket's hello does).
    func connect(_ user: String, _ device: String) async throws {
        _ = try await realtime.queue.registerDevice(DeviceKey(userId: user, deviceId: device), connectionID: 1, maxDevices: 20)
    }

    func send(_ text: String, from sender: String, to recipients: [String], loop: Int = 0) async throws -> SendResult {
        let request = SendMessageRequest(clientMessageId: UUID().uuidString, to: recipients, text: text, headersJSON: "{}")
        switch await realtime.send(request, from: sender, device: nil, on: group.loops[loop]) {
        case .success(let result): return result
        case .failure(let failure): throw failure
        }
    }

    /// Queues `call.incoming` for the callee's devices, as the call service does.
    func incomingCall(_ callId: String, from caller: String, to callee: String, video: Bool = false, headers: JSONObject = [:],
                      expiresIn: Duration = .seconds(30)) async throws -> Int64 {
        let expiresAt = UTCTime.nowMilliseconds() + Int64(expiresIn.components.seconds) * 1000
        let event: JSONObject = [
            "type": "call.incoming", "callId": .string(callId), "from": .string(caller), "video": .bool(video),
            "sdp": "v=0", "headers": .object(headers), "expiresAt": .string(UTCTime.iso8601(milliseconds: expiresAt)),
        ]
        try await realtime.queue.enqueue(event: event, toDevicesOf: [callee], toUsersWithoutDevices: false, expiresAt: expiresAt)
        return expiresAt
    }

    func endCall(_ callId: String, callee: String) async throws {
        let event: JSONObject = ["type": "call.ended", "callId": .string(callId), "endCause": "canceled"]
        try await realtime.queue.enqueue(event: event, toDevicesOf: [callee], toUsersWithoutDevices: false,
                                         expiresAt: UTCTime.nowMilliseconds() + 20_000)
    }

    /// (id, state, attempts, last_error, attempt_log) of every job, by id.
    func jobs() async throws -> [(id: Int64, state: String, kind: String, attempts: Int, error: String?, log: [JSONValue], count: Int)] {
        try await sql("SELECT id, state, kind, attempts, last_error, attempt_log, message_count FROM push_jobs ORDER BY id").map { row in
            let log = (try? JSONParser().parse(row["attempt_log"].string ?? "[]"))?.array ?? []
            return (Int64(row["id"].int ?? 0), row["state"].string ?? "", row["kind"].string ?? "", row["attempts"].int ?? 0,
                    row["last_error"].string, log, row["message_count"].int ?? 0)
        }
    }

    /// Polls `condition` until it holds or `timeout` passes.
    func waitUntil(timeout: Duration = .seconds(10), _ what: String, file: StaticString = #filePath, line: UInt = #line,
                   _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTFail("timed out waiting until \(what)", file: file, line: line)
        throw CancellationError()
    }
}

/// Push tests open no sockets: no session token is valid.
struct NoSessions: RealtimeAuthenticator {
    func authenticate(sessionToken: String) async throws -> RealtimeIdentity? { nil }
    func userExists(_ userId: String) async throws -> Bool { false }
}
