import Foundation
import ParleyAccounts
import XCTest

/// `$regex` finds under `RegexStatementLimit`: a catastrophic pattern ends at the short timeout
/// with 102, more at once than the cap are refused with 100/429 (as Parse's rateLimit), and unrelated requests keep
/// answering meanwhile (issue 13 §2).
final class ParseRegexLimitTests: XCTestCase {
    func testCatastrophicRegexesDoNotStallOtherRequests() async throws {
        let h = try await ParseHarness(regexLimit: RegexStatementLimit(timeout: .milliseconds(300), maxConcurrent: 2))
        let long = String(repeating: "a", count: 30_000) + "b"
        XCTAssertEqual(try h.call("POST", "/parse/classes/Text", body: ["body": long]).status, 201)
        _ = try h.signUp("alice")
        let attack = "/parse/classes/Text" + query(["where": jsonText(["body": ["$regex": #"^(.*)\1$"#]])])

        let started = Date()
        let replies = ReplyBox()
        let group = DispatchGroup()
        // One thread each: Dispatch's global queue runs only as many blocking items at once as the
        // machine has cores (two on CI), which would serialise the six and never reach the cap.
        for _ in 0..<6 {
            group.enter()
            Thread {
                let reply = try? h.call("GET", attack)
                replies.append(reply.map { ($0.status, $0.code, Date().timeIntervalSince(started)) })
                group.leave()
            }.start()
        }
        // Unrelated requests while the six run: each answers fast.
        try await Task.sleep(for: .milliseconds(50))
        for _ in 0..<5 {
            let before = Date()
            let reply = try h.call("GET", "/parse/users" + query(["where": jsonText(["username": "alice"])]))
            XCTAssertEqual(reply.status, 200)
            XCTAssertLessThan(Date().timeIntervalSince(before), 1.0, "an unrelated find waited on the regexes")
        }
        group.wait()

        let all = replies.values
        XCTAssertEqual(all.count, 6)
        let timedOut = all.filter { $0?.status == 400 && $0?.code == 102 }
        let refused = all.filter { $0?.status == 429 && $0?.code == 100 }
        XCTAssertEqual(timedOut.count + refused.count, 6, "\(all)")
        XCTAssertGreaterThanOrEqual(refused.count, 1, "the cap (2) refuses some of six at once: \(all)")
        XCTAssertGreaterThanOrEqual(timedOut.count, 1, "\(all)")
        for reply in all { XCTAssertLessThan(reply?.seconds ?? 99, 2.0, "a regex answer took longer than its timeout allows") }

        // A plain `\Q…\E` contains still works afterwards, and the refusal is not sticky.
        let contains = try h.call("GET", "/parse/classes/Text" + query(["where": jsonText(["body": ["$regex": #"\Qaab\E"#]])]))
        XCTAssertEqual(contains.status, 200)
        XCTAssertEqual((contains["results"] as? [Any])?.count, 1)
        await h.shutdown()
    }
}

private final class ReplyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var replies: [(status: Int, code: Int?, seconds: Double)?] = []
    func append(_ reply: (Int, Int?, Double)?) { lock.withLock { replies.append(reply.map { (status: $0.0, code: $0.1, seconds: $0.2) }) } }
    var values: [(status: Int, code: Int?, seconds: Double)?] { lock.withLock { replies } }
}
