import Foundation
import ParleyJSON
@testable import ParleyKit
import ParleyKitLinux
import ParleyNet
import ParleyTestSupport
import XCTest

/// A real `parley serve`, users signed up through the Parse REST API, and SDK clients on the
/// Linux transport with file storage in a temporary directory.
final class SDKHarness: @unchecked Sendable {
    private(set) var server: ParleyServerProcess
    let serverArguments: [String]
    let group: EventLoopGroup
    let pool: BlockingPool
    let root: String
    var port: Int { server.port }
    var serverURL: ParleyServerURL { ParleyServerURL("http://127.0.0.1:\(server.port)")! }

    struct User {
        let id: String
        let token: String
        let name: String
    }

    init(serverArguments: [String] = []) throws {
        self.serverArguments = ["--realtime-send-rate", "100000", "--realtime-send-burst", "100000"] + serverArguments
        server = try ParleyServerProcess(arguments: self.serverArguments)
        group = try EventLoopGroup(threads: 1)
        pool = try BlockingPool(threads: 1)
        root = NSTemporaryDirectory() + "parleykit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit {
        group.shutdownGracefully()
        pool.shutdown()
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Kills the server with SIGKILL (no shutdown at all) and waits for it to be gone.
    func killServer() {
        server.send(signal: SIGKILL)
        _ = server.waitForExit()
    }

    /// Starts the server again on the same port and database.
    func restartServer() throws {
        server = try ParleyServerProcess(arguments: serverArguments, databaseURL: server.databaseURL, port: server.port)
    }

    /// Signs a user up with the Parse REST API and returns its id and session token.
    func signUp(_ name: String) throws -> User {
        let response = try TestHTTPClient(port: server.port).request(
            "POST", "/parse/users", headers: [("X-Parse-Application-Id", "parley"), ("Content-Type", "application/json")],
            json: "{\"username\":\"\(name)\",\"password\":\"secret-\(name)\"}")
        guard response.status == 201, let object = response.json as? [String: Any], let id = object["objectId"] as? String,
              let token = object["sessionToken"] as? String else {
            throw NSError(domain: "signup", code: response.status, userInfo: [NSLocalizedDescriptionKey: response.text])
        }
        return User(id: id, token: token, name: name)
    }

    /// A client for `deviceId` whose storage lives in `root/<deviceId>` (a restart reuses it).
    func client(_ deviceId: String, transport: (any ParleyTransport)? = nil,
                configure: (inout ParleyClientConfiguration) -> Void = { _ in }) -> (ParleyClient, EventRecorder) {
        var configuration = ParleyClientConfiguration(serverURL: serverURL, deviceId: deviceId, ackDelayMilliseconds: 20)
        configuration.backoff = ReconnectBackoff(baseMilliseconds: 100, capMilliseconds: 1000)
        configure(&configuration)
        let storage = FileStorage(directory: root + "/" + deviceId, runner: BlockingPoolRunner(pool: pool))
        let client = ParleyClient(configuration: configuration, transport: transport ?? LinuxTransport(group: group, blockingPool: pool),
                                  storage: storage, http: LinuxHTTPTransport(client: HTTPClientBox.shared(group: group)))
        let recorder = EventRecorder()
        return (client, recorder)
    }

    /// Starts `client` for `user` with `recorder` as its delegate and waits for the session.
    func connect(_ client: ParleyClient, _ recorder: EventRecorder, as user: User) async throws {
        await client.setDelegate(recorder)
        try await client.connect(sessionToken: user.token)
        try await client.waitUntilConnected(timeout: .seconds(20))
    }
}

import ParleyHTTP

/// One HTTP client per loop group for the tests' REST calls.
enum HTTPClientBox {
    nonisolated(unsafe) static var clients: [ObjectIdentifier: HTTPClient] = [:]
    static let lock = NSLock()

    static func shared(group: EventLoopGroup) -> HTTPClient {
        lock.lock()
        defer { lock.unlock() }
        if let client = clients[ObjectIdentifier(group)] { return client }
        let client = HTTPClient(group: group)
        clients[ObjectIdentifier(group)] = client
        return client
    }
}

/// Records what a client's delegate is told; tests wait for conditions on it.
actor EventRecorder: ParleyClientDelegate {
    private(set) var messages: [ChatMessage] = []
    private(set) var receipts: [Receipt] = []
    private(set) var sent: [String: Result<SentMessage, ParleyError>] = [:]
    private(set) var states: [ParleyConnectionState] = []
    private(set) var incomingCalls: [Call] = []
    private(set) var presence: [Presence] = []
    private(set) var typing: [TypingIndicator] = []
    private(set) var gaps = 0
    /// Runs inside `didReceive message` before it returns (a slow or crashing app).
    var onMessage: (@Sendable (ChatMessage) async -> Void)?
    private var waiters: [(id: Int, check: @Sendable (isolated EventRecorder) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextWaiter = 0

    func setOnMessage(_ body: (@Sendable (ChatMessage) async -> Void)?) { onMessage = body }

    nonisolated func parleyClient(_ client: ParleyClient, didReceive message: ChatMessage) async {
        await record { $0.messages.append(message) }
        if let onMessage = await onMessage { await onMessage(message) }
    }

    nonisolated func parleyClient(_ client: ParleyClient, didReceive receipt: Receipt) async { await record { $0.receipts.append(receipt) } }
    nonisolated func parleyClient(_ client: ParleyClient, didReceivePresence presence: Presence) async { await record { $0.presence.append(presence) } }
    nonisolated func parleyClient(_ client: ParleyClient, didReceiveTyping typing: TypingIndicator) async { await record { $0.typing.append(typing) } }
    nonisolated func parleyClient(_ client: ParleyClient, didSend clientMessageId: String, result: Result<SentMessage, ParleyError>) async {
        await record { $0.sent[clientMessageId] = result }
    }
    nonisolated func parleyClient(_ client: ParleyClient, didChangeConnectionState state: ParleyConnectionState) async {
        await record { $0.states.append(state) }
    }
    nonisolated func parleyClientDidDetectGap(_ client: ParleyClient) async { await record { $0.gaps += 1 } }
    nonisolated func parleyClient(_ client: ParleyClient, didReceiveIncomingCall call: Call) async { await record { $0.incomingCalls.append(call) } }

    private func record(_ change: @Sendable (isolated EventRecorder) -> Void) {
        change(self)
        var remaining: [(id: Int, check: @Sendable (isolated EventRecorder) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
        for waiter in waiters {
            if waiter.check(self) { waiter.continuation.resume(returning: true) } else { remaining.append(waiter) }
        }
        waiters = remaining
    }

    /// Waits until `check` holds (re-checked after every recorded event) or `timeout` passes.
    @discardableResult
    func waitUntil(timeout: Duration = .seconds(20), _ check: @escaping @Sendable (isolated EventRecorder) -> Bool) async -> Bool {
        if check(self) { return true }
        let id = nextWaiter
        nextWaiter += 1
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            await self?.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in waiters.append((id, check, continuation)) }
    }

    private func expire(_ id: Int) {
        if let index = waiters.firstIndex(where: { $0.id == id }) {
            waiters.remove(at: index).continuation.resume(returning: false)
        }
    }

    var messageTexts: [String] { messages.map(\.text) }
    var isConnected: Bool { if case .connected = states.last { true } else { false } }
}
