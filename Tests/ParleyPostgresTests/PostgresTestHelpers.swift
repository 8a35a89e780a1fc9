import Foundation
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

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

/// A TCP listener on 127.0.0.1 that accepts connections (the kernel completes the handshake)
/// and never answers: a hung or black-holed PostgreSQL.
final class SilentServer {
    let port: Int
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard fd >= 0, bound, listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
