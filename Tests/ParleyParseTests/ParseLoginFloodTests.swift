import Foundation
import ParleyAccounts
import Synchronization
import XCTest

/// A flood of logins over real sockets cannot queue argon2id work without bound: past
/// `passwordHashQueue` jobs the rest are refused at once (429, code 100), so no login waits
/// behind the whole flood and the server answers a real login right after.
final class ParseLoginFloodTests: XCTestCase {
    private struct Outcome: Sendable { let status: Int; let code: Int?; let seconds: Double }

    private static func timedLogin(_ h: ParseHarness, _ username: String, _ password: String) -> Outcome {
        let start = Date()
        let reply = try? h.call("POST", "/parse/login", body: ["username": username, "password": password])
        return Outcome(status: reply?.status ?? 0, code: reply?.code, seconds: Date().timeIntervalSince(start))
    }

    /// Runs `count` logins at once, each on its own thread and connection.
    private func flood(_ h: ParseHarness, count: Int) -> [Outcome] {
        let outcomes = Mutex<[Outcome]>([])
        let done = DispatchGroup()
        for n in 0..<count {
            done.enter()
            let thread = Thread {
                let outcome = Self.timedLogin(h, "nobody\(n)", "guess")
                outcomes.withLock { $0.append(outcome) }
                done.leave()
            }
            thread.start()
        }
        done.wait()
        return outcomes.withLock { $0 }
    }

    func testALoginFloodIsRefusedFastAndNoLoginWaitsBehindIt() async throws {
        // Real argon2id cost (libsodium interactive), two blocking workers, a queue of 4.
        let accounts = AccountsConfiguration(passwordHashQueue: 4)
        let h = try await ParseHarness(accounts: accounts, loginThrottle: LoginThrottle(perAccount: 0, perAddress: 0))
        _ = try h.signUp("alice", password: "right")
        let single = (0..<3).map { _ in Self.timedLogin(h, "alice", "right") }
        XCTAssertTrue(single.allSatisfy { $0.status == 200 })
        let oneLogin = single.map(\.seconds).min() ?? 1

        let outcomes = flood(h, count: 60)
        let refused = outcomes.filter { $0.status == 429 }
        let answered = outcomes.filter { $0.status == 404 }
        XCTAssertEqual(refused.count + answered.count, 60, "every login is answered: 404 (no such user) or 429")
        XCTAssertGreaterThan(refused.count, 0, "the queue bound refuses part of the flood")
        XCTAssertTrue(refused.allSatisfy { $0.code == 100 }, "refusals carry Parse's rateLimit code")
        let slowest = outcomes.map(\.seconds).max() ?? 0
        // With the bound lifted, 60 hashes on 2 workers make the last wait ~30 single logins.
        XCTAssertLessThan(slowest, 10 * oneLogin + 0.5,
                          "no login waits behind the flood (slowest \(slowest) s, one login \(oneLogin) s)")
        if !refused.isEmpty {
            let medianRefusal = refused.map(\.seconds).sorted()[refused.count / 2]
            XCTAssertLessThan(medianRefusal, oneLogin + 0.2, "a refusal does not wait for a hash")
        }

        XCTAssertEqual(Self.timedLogin(h, "alice", "right").status, 200, "the server logs users in right after the flood")
        await h.shutdown()
    }
}
