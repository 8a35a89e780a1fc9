import Foundation
import ParleyAccounts
import ParleyNet
import ParleyParse
import XCTest

/// Failed logins are throttled per account and per client address, batches included, answered
/// as Parse Server's `rateLimit` (429, code 100, "Too many requests.").
final class ParseLoginThrottleTests: XCTestCase {
    private func logIn(_ h: ParseHarness, _ username: String, _ password: String) throws -> ParseHarness.Reply {
        try h.call("POST", "/parse/login", body: ["username": username, "password": password])
    }

    func testFailuresPerAccountAreCappedAndASuccessResetsThem() async throws {
        let h = try await ParseHarness(loginThrottle: LoginThrottle(perAccount: 3, perAddress: 0))
        _ = try h.signUp("alice", password: "right")
        _ = try h.signUp("bob", password: "right")
        XCTAssertEqual(try logIn(h, "alice", "right").status, 200)
        for _ in 0..<3 { XCTAssertEqual(try logIn(h, "alice", "wrong").code, 101) }
        let refused = try logIn(h, "ALICE", "right")
        XCTAssertEqual(refused.status, 429, "the right password does not get past the limit either")
        XCTAssertEqual(refused.code, 100)
        XCTAssertEqual(refused["error"] as? String, "Too many requests.")
        let viaGet = try h.call("GET", "/parse/login" + query(["username": "alice", "password": "right"]))
        XCTAssertEqual(viaGet.status, 429, "GET /login is throttled alike")
        XCTAssertEqual(try logIn(h, "bob", "right").status, 200, "another account is not affected")
        await h.shutdown()
    }

    func testABatchOfLoginsCannotTryManyPasswords() async throws {
        let h = try await ParseHarness(loginThrottle: LoginThrottle(perAccount: 5, perAddress: 0))
        _ = try h.signUp("alice", password: "right")
        var requests: [[String: Any]] = (0..<49).map { n in
            ["method": "POST", "path": "/parse/login", "body": ["username": "alice", "password": "guess\(n)"]]
        }
        requests.append(["method": "POST", "path": "/parse/login", "body": ["username": "alice", "password": "right"]])
        let reply = try h.call("POST", "/parse/batch", body: ["requests": requests])
        XCTAssertEqual(reply.status, 200)
        let results = reply.json as? [[String: Any]] ?? []
        XCTAssertEqual(results.count, 50)
        let tried = results.filter { ($0["error"] as? [String: Any])?["code"] as? Int == 101 }.count
        let throttled = results.filter { ($0["error"] as? [String: Any])?["code"] as? Int == 100 }.count
        XCTAssertEqual(tried, 5, "only the account's budget of passwords is tried")
        XCTAssertEqual(throttled, 45, "the rest, the right password included, is refused")
        await h.shutdown()
    }

    func testTheAddressComesFromXForwardedForOnlyThroughATrustedProxy() async throws {
        func fail(_ h: ParseHarness, from address: String) throws -> Int {
            try h.call("POST", "/parse/login", body: ["username": "nobody", "password": "x"],
                       headers: [("X-Forwarded-For", "203.0.113.9, " + address)]).status
        }
        let throttle = LoginThrottle(perAccount: 0, perAddress: 2)
        let proxied = try await ParseHarness(serverURL: ParseServerURL(trustedProxies: [IPNetwork("127.0.0.1/32")!]), loginThrottle: throttle)
        XCTAssertEqual(try fail(proxied, from: "10.0.0.1"), 404)
        XCTAssertEqual(try fail(proxied, from: "10.0.0.1"), 404)
        XCTAssertEqual(try fail(proxied, from: "10.0.0.1"), 429, "the forwarded client is throttled")
        XCTAssertEqual(try fail(proxied, from: "10.0.0.2"), 404, "another forwarded client is not")
        await proxied.shutdown()

        let direct = try await ParseHarness(loginThrottle: LoginThrottle(perAccount: 0, perAddress: 2))
        XCTAssertEqual(try fail(direct, from: "10.0.0.1"), 404)
        XCTAssertEqual(try fail(direct, from: "10.0.0.2"), 404)
        XCTAssertEqual(try fail(direct, from: "10.0.0.3"), 429, "a client cannot pick its address by a header")
        await direct.shutdown()
    }

    func testFailuresPerAddressAreCapped() async throws {
        let h = try await ParseHarness(loginThrottle: LoginThrottle(perAccount: 0, perAddress: 4))
        _ = try h.signUp("alice", password: "right")
        for n in 0..<4 { XCTAssertEqual(try logIn(h, "user\(n)", "x").code, 101) }
        let refused = try logIn(h, "alice", "right")
        XCTAssertEqual(refused.status, 429)
        XCTAssertEqual(refused.code, 100)
        await h.shutdown()
    }
}
