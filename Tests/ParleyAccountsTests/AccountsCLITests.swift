import ParleyAccounts
import ParleyJSON
import Synchronization
import XCTest

final class AccountsCLITests: XCTestCase {
    final class Captured: Sendable {
        let out = Mutex<[String]>([])
        let err = Mutex<[String]>([])
        let input: String?
        init(input: String? = nil) { self.input = input }
        var io: AccountsCLI.IO {
            AccountsCLI.IO(output: { text in self.out.withLock { $0.append(text) } },
                           error: { text in self.err.withLock { $0.append(text) } },
                           readLine: { self.input })
        }
        var stdout: String { out.withLock { $0.joined(separator: "\n") } }
        var stderr: String { err.withLock { $0.joined(separator: "\n") } }
    }

    func run(_ h: AccountsHarness, _ arguments: String, input: String? = nil) async -> (Int32, Captured) {
        let captured = Captured(input: input)
        let code = await AccountsCLI.run(arguments: arguments.split(separator: " ").map(String.init), accounts: h.accounts, io: captured.io)
        return (code, captured)
    }

    func testUserCommandsEndToEnd() async throws {
        let h = try await AccountsHarness(prefix: "cli")
        var (code, io) = await run(h, "user create alice --password-stdin --email alice@x.io --set age=30 --set screenName=Al --json", input: "s3cret")
        XCTAssertEqual(code, 0, io.stderr)
        let created = try JSONParser().parse(io.stdout)
        let id = try XCTUnwrap(created["objectId"]?.string)
        _ = try await h.accounts.users.logIn(username: "alice", email: nil, password: "s3cret", installationId: nil, on: h.client)

        (code, io) = await run(h, "user list")
        XCTAssertEqual(code, 0)
        XCTAssertTrue(io.stdout.contains("alice") && io.stdout.contains("alice@x.io") && io.stdout.contains("(1 row)"), io.stdout)
        (code, io) = await run(h, "user list --where {\"age\":{\"$gt\":40}} --json")
        XCTAssertEqual(io.stdout, "[]")

        (code, io) = await run(h, "user show alice --json")
        XCTAssertEqual(code, 0)
        let shown = try JSONParser().parse(io.stdout)
        XCTAssertEqual(shown["screenName"], "Al")
        XCTAssertEqual(shown["age"], 30)
        XCTAssertEqual(shown["sessions"], 1)
        XCTAssertEqual(shown["banned"], false)

        (code, io) = await run(h, "user sessions \(id)")
        XCTAssertTrue(io.stdout.contains("(1 row)"), io.stdout)
        (code, io) = await run(h, "user ban alice")
        XCTAssertEqual(code, 0)
        XCTAssertTrue(io.stdout.contains("revoked 1 session"), io.stdout)
        await XCTAssertParseError(101) { try await h.accounts.users.logIn(username: "alice", email: nil, password: "s3cret", installationId: nil, on: h.client) }
        (code, io) = await run(h, "user unban alice")
        XCTAssertEqual(code, 0)

        (code, io) = await run(h, "user reset-password alice")
        XCTAssertEqual(code, 0)
        let password = try XCTUnwrap(io.stdout.split(separator: "\n").last?.split(separator: " ").last.map(String.init))
        let login = try parsed(try await h.accounts.users.logIn(username: "alice", email: nil, password: password, installationId: nil, on: h.client))
        let token = try XCTUnwrap(login["sessionToken"]?.string)
        (code, io) = await run(h, "session revoke \(token)")
        XCTAssertEqual(code, 0)
        await XCTAssertParseError(209) { try await h.accounts.sessions.lookup(token, on: h.client) }

        _ = try await h.accounts.users.logIn(username: "alice", email: nil, password: password, installationId: nil, on: h.client)
        (code, io) = await run(h, "user revoke alice")
        XCTAssertEqual(code, 0)
        XCTAssertTrue(io.stdout.contains("revoked 1 session"), io.stdout)

        (code, io) = await run(h, "user create alice")
        XCTAssertEqual(code, 1)
        XCTAssertTrue(io.stderr.contains("Account already exists"), io.stderr)
        (code, io) = await run(h, "user show nobody")
        XCTAssertEqual(code, 1)
        (code, io) = await run(h, "user frobnicate")
        XCTAssertEqual(code, 2)
        (code, io) = await run(h, "user list --bogus")
        XCTAssertEqual(code, 2)
        (code, io) = await run(h, "session revoke r:00000000000000000000000000000000")
        XCTAssertEqual(code, 1)

        (code, io) = await run(h, "user delete alice")
        XCTAssertEqual(code, 0)
        (code, io) = await run(h, "user list --json")
        XCTAssertEqual(io.stdout, "[]")
        await h.shutdown()
    }
}
