import Foundation
import XCTest

/// `GET /users` and `GET /classes/:className` answered inline, from their read's completion on
/// the event loop: the same status and JSON as the full (task) path gives the JavaScript SDK's
/// `_method: GET` form of the same query, and whatever the inline answer must not take goes
/// through the middleware.
final class ParseInlineFindTests: XCTestCase {
    func testInlineFindsAnswerAsTheFullPath() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["age": 30])
        _ = try h.signUp("bob", extra: ["age": 40])
        for n in 0..<6 {
            let acl: [String: Any] = n % 3 == 2 ? [alice.id: ["read": true]] : ["*": ["read": true]]
            _ = try h.call("POST", "/parse/classes/Card", body: ["name": "card", "copy": n, "ACL": acl])
        }
        let cases: [(path: String, parameters: [String: Any], token: String?)] = [
            ("/parse/users", ["where": ["username": "alice"]], nil),
            ("/parse/users", ["where": ["age": ["$gte": 30]], "order": "-age"], alice.token),
            ("/parse/classes/_User", ["where": ["username": "bob"], "keys": "username"], nil),
            ("/parse/classes/Card", ["where": ["name": "card"], "order": "-copy", "limit": 3, "skip": 1], nil),
            ("/parse/classes/Card", ["where": ["name": "card"], "order": "copy"], alice.token),
            ("/parse/classes/Card", ["where": ["name": "card"], "limit": 0], nil),
            ("/parse/classes/NoSuchClass", [:], nil),
        ]
        // An inline find needs the class's schema cached (its permissions): the first find of a
        // class this node never read takes the full path.
        XCTAssertEqual(try h.call("GET", "/parse/classes/NoSuchClass").status, 200)
        for (path, parameters, token) in cases {
            let before = h.fullPath.requests
            var textual: [String: String] = [:]
            for (name, value) in parameters {
                textual[name] = switch value {
                case let text as String: text
                case let number as Int: String(number)
                default: jsonText(value)
                }
            }
            let inline = try h.call("GET", path + (textual.isEmpty ? "" : query(textual)), token: token)
            XCTAssertEqual(h.fullPath.requests, before, "\(path) \(parameters) should be answered inline")
            var form = parameters
            form["_method"] = "GET"
            form["_ApplicationId"] = h.appID
            if let token { form["_SessionToken"] = token }
            let full = try h.call("POST", path, appID: .some(nil), headers: [("Content-Type", "text/plain")], rawBody: jsonText(form))
            XCTAssertEqual(h.fullPath.requests, before + 1, "the _method form takes the full path")
            XCTAssertEqual(inline.status, full.status, "\(path) \(parameters)")
            XCTAssertEqual(inline.json as? NSDictionary, full.json as? NSDictionary, "\(path) \(parameters)")
        }
        // Spot checks that the comparison above compared something.
        let asAlice = try h.call("GET", "/parse/classes/Card" + query(["where": jsonText(["name": "card"])]), token: alice.token)
        XCTAssertEqual((asAlice["results"] as? [Any])?.count, 6)
        let anonymous = try h.call("GET", "/parse/classes/Card" + query(["where": jsonText(["name": "card"])]))
        XCTAssertEqual((anonymous["results"] as? [Any])?.count, 4)
        let badRegex = try h.call("GET", "/parse/classes/Card" + query(["where": jsonText(["name": ["$regex": "("]])]))
        XCTAssertEqual(badRegex.status, 400)
        XCTAssertNotNil(badRegex.code)
        await h.shutdown()
    }

    func testWhatTheInlineFindDeclinesTakesTheFullPath() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        let declined: [(path: String, token: String?, master: Bool, code: Int?)] = [
            ("/parse/users" + query(["count": "1", "limit": "0"]), nil, false, nil),
            ("/parse/users" + query(["where": "{not json"]), nil, false, 107),
            ("/parse/users", "r:not-a-session", false, 209),
            ("/parse/classes/_Installation", alice.token, false, 119),
            ("/parse/classes/_Session", nil, false, 209),
            // A `$regex` runs under RegexStatementLimit (its own transaction); an invalid one
            // fails in PostgreSQL with 102.
            ("/parse/classes/Card" + query(["where": jsonText(["name": ["$regex": "("]])]), nil, false, 102),
            ("/parse/users" + query(["where": jsonText(["username": ["$regex": "^a"]])]), nil, false, nil),
        ]
        for (path, token, master, code) in declined {
            let before = h.fullPath.requests
            let reply = try h.call("GET", path, token: token, master: master)
            XCTAssertEqual(h.fullPath.requests, before + 1, "\(path) should take the full path")
            XCTAssertEqual(reply.code, code, "\(path): \(reply.json ?? "")")
        }
        let wrongApp = try h.call("GET", "/parse/users", appID: .some("other"))
        XCTAssertEqual(wrongApp.status, 403)
        // The master key is authorized inline by the same step: an inline answer with master rights.
        let before = h.fullPath.requests
        let asMaster = try h.call("GET", "/parse/users", master: true)
        XCTAssertEqual(h.fullPath.requests, before, "a master find needs nothing the inline step lacks")
        XCTAssertEqual(asMaster.status, 200)
        XCTAssertEqual((asMaster["results"] as? [[String: Any]])?.first?["username"] as? String, "alice")
        await h.shutdown()
    }
}
