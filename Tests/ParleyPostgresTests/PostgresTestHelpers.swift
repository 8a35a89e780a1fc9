import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// A client on a fresh database of the shared test cluster (or of `postgres`), with its own loops.
final class TestClient: Sendable {
    let group: EventLoopGroup
    let client: PostgresClient
    let connectionString: String

    init(prefix: String, threads: Int = 1, postgres: TestPostgres? = nil,
         configure: (inout PostgresConfiguration) -> Void = { _ in }) async throws {
        let postgres = try postgres ?? TestPostgres.shared()
        connectionString = try postgres.makeDatabase(prefix: prefix)
        group = try EventLoopGroup(threads: threads)
        var configuration = PostgresConfiguration(connectionString: connectionString)
        configure(&configuration)
        client = PostgresClient(group: group, configuration: configuration)
        client.start()
        try await client.waitUntilReady()
    }

    func shutdown() async {
        await client.shutdown()
        group.shutdownGracefully()
    }
}

/// Runs `body` as a task on `loop` and returns its result.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await Task(executorPreference: loop) { try await body() }.value
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(10), _ condition: @Sendable () async -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
