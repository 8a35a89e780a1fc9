import Foundation
import ParleyTestSupport
import XCTest

/// A body over `--max-body-bytes` under `/parse`: 413 with Parse Server's own answer (Express's
/// body parser error, `{"error":"request entity too large"}`), and the server keeps serving.
final class ParseBodyLimitTests: XCTestCase {
    func testOversizedBodyGetsParseServers413() async throws {
        let h = try await ParseHarness()
        let big = "{\"a\":\"" + String(repeating: "x", count: 1 << 20) + "\"}"
        for path in ["/parse/classes/Thing", "/parse/users", "/parse/batch", "/parse/nowhere/at/all"] {
            let reply = try h.call("POST", path, headers: [("Content-Type", "application/json")], rawBody: big)
            XCTAssertEqual(reply.status, 413, path)
            XCTAssertEqual(reply.json as? [String: String], ["error": "request entity too large"], path)
            XCTAssertEqual(reply.header("Access-Control-Allow-Origin"), "*", path)
        }
        let small = try h.call("POST", "/parse/classes/Thing", body: ["a": "x"])
        XCTAssertEqual(small.status, 201, "\(small.json ?? "")")
        await h.shutdown()
    }
}
