import Foundation
import ParleyJSON
import ParleyNet
import ParleyPostgres
@testable import ParleyRealtime
import ParleyTestSupport
import Synchronization
import XCTest

/// A fresh migrated database, loops, a client and a realtime service (no sockets).
final class RealtimeTestEnvironment: Sendable {
    let group: EventLoopGroup
    let client: PostgresClient
    let service: RealtimeService
    let connectionString: String
    /// The sessions the service accepts (the server wires in the accounts module's instead).
    let sessions = TestSessions()

    init(threads: Int = 2, configure: (inout RealtimeConfiguration) -> Void = { _ in }) async throws {
        connectionString = try TestPostgres.shared().makeDatabase(prefix: "realtime")
        let migrations = ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path
        _ = try Migrator(connectionString: connectionString, directory: migrations).migrate()
        group = try EventLoopGroup(threads: threads)
        client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: connectionString))
        client.start()
        try await client.waitUntilReady()
        var configuration = RealtimeConfiguration()
        configure(&configuration)
        service = RealtimeService(database: client, group: group, configuration: configuration, authenticator: sessions)
    }

    var queue: DeliveryQueue { service.queue }

    func shutdown() async {
        service.shutdown()
        await client.shutdown()
        group.shutdownGracefully()
    }

    @discardableResult
    func sql(_ text: String, _ params: [PostgresData] = []) async throws -> PostgresRows {
        try await client.query(text, params, prepared: false)
    }

    func makeUsers(_ ids: String...) async throws {
        for id in ids {
            try await sql("INSERT INTO users (object_id, username) VALUES ($1, $2)", [.text(id), .text("name-" + id)])
        }
    }

    func register(_ user: String, _ device: String, connection: UInt64 = 1, maxDevices: Int = 20) async throws -> DeliveryQueue.DeviceState {
        try await queue.registerDevice(DeviceKey(userId: user, deviceId: device), connectionID: connection, maxDevices: maxDevices)
    }

    /// Sends through the group commit of loop `loop`.
    func send(_ text: String, from sender: String, device: String? = nil, to recipients: [String], clientID: String? = nil,
              loop: Int = 0) async -> Result<SendResult, RealtimeFailure> {
        let request = SendMessageRequest(clientMessageId: clientID ?? UUID().uuidString, to: recipients, text: text, headersJSON: "{}")
        let eventLoop = group.loops[loop]
        return await service.send(request, from: sender, device: device, on: eventLoop)
    }

    func sendOK(_ text: String, from sender: String, device: String? = nil, to recipients: [String], clientID: String? = nil,
                loop: Int = 0) async throws -> SendResult {
        switch await send(text, from: sender, device: device, to: recipients, clientID: clientID, loop: loop) {
        case .success(let result): return result
        case .failure(let failure): throw failure
        }
    }

    func sendFailure(_ text: String, from sender: String, device: String? = nil, to recipients: [String]) async throws -> RealtimeFailure {
        switch await send(text, from: sender, device: device, to: recipients) {
        case .success(let result): throw RealtimeFailure(.internal, "unexpectedly sent \(result)")
        case .failure(let failure): return failure
        }
    }

    /// The device's queued events after `after`.
    func events(_ user: String, _ device: String, after: Int64 = 0) async throws -> [(seq: Int64, body: QueuedEventBody?)] {
        try await queue.events(for: DeviceKey(userId: user, deviceId: device), after: after, limit: 10_000)
    }

    /// The texts of the device's queued messages, in seq order.
    func texts(_ user: String, _ device: String) async throws -> [String] {
        try await events(user, device).compactMap { event in
            if case .message(let message)? = event.body { return message.text }
            return nil
        }
    }
}

/// Sessions by token, in memory: what a test says is valid (or that the store is down).
final class TestSessions: RealtimeAuthenticator {
    struct Unavailable: Error {}

    private let identities = Mutex<[String: RealtimeIdentity]>([:])
    private let down = Mutex(false)

    func add(token: String, userId: String, expiresAt: Int64 = .max) {
        identities.withLock { $0[token] = RealtimeIdentity(userId: userId, sessionExpiresAt: expiresAt) }
    }

    func setDown(_ value: Bool) { down.withLock { $0 = value } }

    func authenticate(sessionToken: String) async throws -> RealtimeIdentity? {
        if down.withLock({ $0 }) { throw Unavailable() }
        return identities.withLock { $0[sessionToken] }
    }

    func userExists(_ userId: String) async throws -> Bool {
        identities.withLock { $0.values.contains { $0.userId == userId } }
    }
}

extension Result {
    var value: Success? {
        if case .success(let value) = self { return value }
        return nil
    }

    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
