import Foundation
import ParleyTestSupport
import XCTest

/// NUL (U+0000) in any input the Parse API passes to PostgreSQL, which cannot store it in text:
/// a clear 4xx Parse error on every path, never a 500, and the server keeps serving. Paths with
/// a check of their own keep its code (200 for a signup username, 102 in queries, 105 in field
/// names); every other path gets 107 from the one mapping of the database layer's refusal.
final class ParseNULInputTests: XCTestCase {
    func testLoginWithNULIsRefusedWith107() async throws {
        let h = try await ParseHarness()
        _ = try h.signUp("alice", password: "pw")
        let queries: [[String: String]] = [
            ["username": "a\u{0}b", "password": "pw"],
            ["username": "alice", "email": "\u{0}", "password": "pw"],
            ["email": "a\u{0}@x.io", "password": "pw"],
        ]
        for parameters in queries {
            let reply = try h.call("GET", "/parse/login" + query(parameters))
            XCTAssertEqual(reply.status, 400, "\(parameters): \(reply.json ?? "")")
            XCTAssertEqual(reply.code, 107, "\(parameters): \(reply.json ?? "")")
            XCTAssertEqual(reply["error"] as? String, "strings and keys may not contain the NUL character (\\u0000)")
        }
        let body = try h.call("POST", "/parse/login", body: ["username": "alice\u{0}", "password": "pw"])
        XCTAssertEqual(body.status, 400, "\(body.json ?? "")")
        XCTAssertEqual(body.code, 107)
        // The same request without the NUL logs in: nothing was left broken.
        let login = try h.call("POST", "/parse/login", body: ["username": "alice", "password": "pw"])
        XCTAssertEqual(login.status, 200, "\(login.json ?? "")")
        await h.shutdown()
    }

    func testSignupAndObjectFieldsWithNULAreRefused() async throws {
        let h = try await ParseHarness()
        let user = try h.signUp("bob")
        let username = try h.call("POST", "/parse/users", body: ["username": "b\u{0}ob", "password": "pw"])
        XCTAssertEqual(username.status, 400)
        XCTAssertEqual(username.code, 200)
        let field = try h.call("POST", "/parse/users", body: ["username": "carol", "password": "pw", "bio": "x\u{0}"])
        XCTAssertEqual(field.status, 400)
        XCTAssertEqual(field.code, 107)
        let created = try h.call("POST", "/parse/classes/Note", body: ["text": "a\u{0}b"])
        XCTAssertEqual(created.status, 400)
        XCTAssertEqual(created.code, 107)
        let nested = try h.call("POST", "/parse/classes/Note", body: ["meta": ["k\u{0}": 1]])
        XCTAssertEqual(nested.code, 107)
        let key = try h.call("POST", "/parse/classes/Note", body: ["te\u{0}xt": "x"])
        XCTAssertEqual(key.code, 105)
        let note = try h.call("POST", "/parse/classes/Note", body: ["text": "fine"])
        XCTAssertEqual(note.status, 201)
        let id = try XCTUnwrap(note["objectId"] as? String)
        let update = try h.call("PUT", "/parse/classes/Note/\(id)", body: ["text": "\u{0}"])
        XCTAssertEqual(update.status, 400)
        XCTAssertEqual(update.code, 107)
        let profile = try h.call("PUT", "/parse/users/\(user.id)", body: ["bio": "\u{0}"], token: user.token)
        XCTAssertEqual(profile.code, 107)
        let installation = try h.call("POST", "/parse/installations", body: ["installationId": "device-1", "deviceType": "ios", "model": "a\u{0}"])
        XCTAssertEqual(installation.code, 107)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Note/\(id)")["text"] as? String, "fine")
        await h.shutdown()
    }

    func testQueriesWithNULAreRefused() async throws {
        let h = try await ParseHarness()
        _ = try h.call("POST", "/parse/classes/Note", body: ["text": "x"])
        for className in ["Note", "_User"] {
            let path = className == "_User" ? "/parse/users" : "/parse/classes/\(className)"
            for parameters in [["where": jsonText(["text": "a\u{0}"])], ["order": "te\u{0}xt"], ["keys": "\u{0}"]] {
                let reply = try h.call("GET", path + query(parameters))
                XCTAssertEqual(reply.status, 400, "\(path) \(parameters): \(reply.json ?? "")")
                XCTAssertEqual(reply.code, 102, "\(path) \(parameters): \(reply.json ?? "")")
            }
        }
        let posted = try h.call("POST", "/parse/classes/Note", body: ["_method": "GET", "where": ["text": ["$in": ["\u{0}"]]]])
        XCTAssertEqual(posted.code, 102)
        await h.shutdown()
    }

    /// Ids with NUL cannot come in the URL path (the HTTP layer refuses `%00` there), but a batch
    /// sub-request path is JSON text: each answers its own 107 and the batch goes on.
    func testBatchPathsWithNULAnswer107PerSubRequest() async throws {
        let h = try await ParseHarness()
        let user = try h.signUp("dave")
        let paths = ["/parse/users/a\u{0}b", "/parse/classes/Note/a\u{0}b", "/parse/sessions/a\u{0}b", "/parse/installations/a\u{0}b"]
        var requests: [[String: Any]] = paths.map { ["method": "GET", "path": $0] }
        requests.append(["method": "DELETE", "path": "/parse/classes/Note/x\u{0}"])
        requests.append(["method": "GET", "path": "/parse/users/\(user.id)"])
        let reply = try h.call("POST", "/parse/batch", body: ["requests": requests], token: user.token, master: true)
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")")
        let results = try XCTUnwrap(reply.json as? [[String: Any]])
        XCTAssertEqual(results.count, requests.count)
        for (index, result) in results.dropLast().enumerated() {
            let error = result["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? Int, 107, "\(requests[index]["path"] ?? ""): \(result)")
        }
        XCTAssertEqual((results.last?["success"] as? [String: Any])?["objectId"] as? String, user.id)

        let transaction = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [["method": "POST", "path": "/parse/classes/Note", "body": ["n": 1]],
                                                                                                       ["method": "GET", "path": "/parse/users/\u{0}"]]])
        XCTAssertEqual(transaction.status, 400, "\(transaction.json ?? "")")
        XCTAssertEqual(transaction.code, 107)
        XCTAssertEqual((try h.call("GET", "/parse/classes/Note")["results"] as? [Any])?.count, 0, "the transaction was rolled back")
        await h.shutdown()
    }
}
