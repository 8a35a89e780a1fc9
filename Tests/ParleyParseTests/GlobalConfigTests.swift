import Foundation
import ParleyAccounts
import ParleyPostgres
import XCTest

/// `GET|PUT /config` over HTTP and PostgreSQL, as Parse Server's `GlobalConfigRouter`.
final class GlobalConfigTests: XCTestCase {
    func testParamsAndMasterKeyOnlyParams() async throws {
        let h = try await ParseHarness()
        let empty = try h.call("GET", "/parse/config")
        XCTAssertEqual(empty.status, 200)
        XCTAssertEqual((empty["params"] as? [String: Any])?.count, 0, "\(empty.json ?? "")")

        let put = try h.call("PUT", "/parse/config", body: ["params": ["welcome": "hi", "limit": 3, "secret": "s3"],
                                                            "masterKeyOnly": ["secret": true]], master: true)
        XCTAssertEqual(put.status, 200, "\(put.json ?? "")")
        XCTAssertEqual(put["result"] as? Bool, true)

        let client = try h.call("GET", "/parse/config")
        let params = try XCTUnwrap(client["params"] as? [String: Any])
        XCTAssertEqual(params["welcome"] as? String, "hi")
        XCTAssertEqual(params["limit"] as? Int, 3)
        XCTAssertNil(params["secret"], "a master-key-only param is hidden without the master key")
        XCTAssertEqual(client["masterKeyOnly"] as? [String: Bool], ["welcome": false, "limit": false])

        let master = try h.call("GET", "/parse/config", master: true)
        XCTAssertEqual((master["params"] as? [String: Any])?["secret"] as? String, "s3")
        XCTAssertEqual((master["masterKeyOnly"] as? [String: Bool])?["secret"], true)

        // A later PUT merges: it sets and deletes single params and keeps the others.
        XCTAssertEqual(try h.call("PUT", "/parse/config", body: ["params": ["welcome": ["__op": "Delete"], "limit": 4]], master: true).status, 200)
        let merged = try XCTUnwrap(try h.call("GET", "/parse/config", master: true)["params"] as? [String: Any])
        XCTAssertNil(merged["welcome"])
        XCTAssertEqual(merged["limit"] as? Int, 4)
        XCTAssertEqual(merged["secret"] as? String, "s3")
        await h.shutdown()
    }

    func testOnlyTheMasterKeyUpdatesAndBadBodiesAreRefused() async throws {
        let h = try await ParseHarness()
        let user = try h.signUp("mallory")
        for token in [nil, user.token] {
            let refused = try h.call("PUT", "/parse/config", body: ["params": ["welcome": "pwned"]], token: token)
            XCTAssertEqual(refused.status, 403)
            XCTAssertEqual(refused["error"] as? String, "unauthorized: master key is required")
        }
        let batched = try h.call("POST", "/parse/batch", body: ["requests": [["method": "PUT", "path": "/parse/config", "body": ["params": ["welcome": "pwned"]]]]],
                                 token: user.token)
        XCTAssertEqual(batched.status, 200)
        XCTAssertNil((try h.call("GET", "/parse/config", master: true)["params"] as? [String: Any])?["welcome"], "not through batch either")

        XCTAssertEqual(try h.call("PUT", "/parse/config", body: ["params": "x"], master: true).code, 107)
        XCTAssertEqual(try h.call("PUT", "/parse/config", body: ["params": ["a": 1], "masterKeyOnly": [1]], master: true).code, 107)
        XCTAssertEqual(try h.call("PUT", "/parse/config", body: ["params": ["": 1]], master: true).code, 105)
        XCTAssertEqual(try h.call("PUT", "/parse/config", master: true, rawBody: "{\"params\":").code, 107)

        // The stored config is bounded: a flood of large params stops at 1 MiB with 116.
        let big = String(repeating: "x", count: 200_000)
        var last: ParseHarness.Reply?
        for index in 0..<40 {
            last = try h.call("PUT", "/parse/config", body: ["params": ["p\(index)": big + "\(index)"]], master: true)
            if last?.status != 200 { break }
        }
        XCTAssertEqual(last?.code, 116, "\(last?.json ?? "")")
        XCTAssertEqual(try h.call("GET", "/parse/config").status, 200, "the config still reads")
        await h.shutdown()
    }

    func testAChangeOnOneNodeReachesTheOtherNodesCache() async throws {
        let h = try await ParseHarness()
        try await h.listenForAccountEvents()
        XCTAssertEqual(try h.call("PUT", "/parse/config", body: ["params": ["version": 1]], master: true).status, 200)
        // Cached on this node now.
        XCTAssertEqual((try h.call("GET", "/parse/config")["params"] as? [String: Any])?["version"] as? Int, 1)
        // Another node (its own caches, same database) changes it.
        let other = Accounts(database: h.database, blockingPool: h.pool,
                             configuration: AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192))
        try await other.config.update(body: ["params": ["version": 2]], events: other.events, on: h.database)
        let deadline = ContinuousClock.now + .seconds(20)
        while (try h.call("GET", "/parse/config")["params"] as? [String: Any])?["version"] as? Int != 2 {
            guard ContinuousClock.now < deadline else { return XCTFail("the other node's change never reached this node") }
            try await Task.sleep(for: .milliseconds(10))
        }
        await h.shutdown()
    }
}
