import Foundation
import ParleyAccounts
import XCTest

/// `include`, dotted `keys` and `excludeKeys` over HTTP and PostgreSQL: every form SDKs send,
/// arrays, dotted paths, `*`, targets the reader cannot read, `_User` targets' hidden fields, the
/// statement count, and the bounds.
final class IncludeRESTTests: XCTestCase {
    private func pointer(_ className: String, _ id: String) -> [String: Any] { ["__type": "Pointer", "className": className, "objectId": id] }

    private func create(_ h: ParseHarness, _ className: String, _ body: [String: Any], token: String? = nil) throws -> String {
        let answer = try h.call("POST", "/parse/classes/\(className)", body: body, token: token, master: token == nil)
        XCTAssertEqual(answer.status, 201, "\(answer.json ?? "")")
        return try XCTUnwrap(answer["objectId"] as? String)
    }

    private func results(_ reply: ParseHarness.Reply, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")", file: file, line: line)
        return reply["results"] as? [[String: Any]] ?? []
    }

    func testIncludeFormsArraysDottedStarAndUnreadableTargets() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice", extra: ["email": "alice@example.com"])
        let bob = try h.signUp("bob", extra: ["email": "bob@example.com"])
        let open = try create(h, "Author", ["name": "Open"])
        let secret = try create(h, "Author", ["name": "Secret", "ACL": [bob.id: ["read": true]]])
        let post = try create(h, "Post", ["title": "First", "author": pointer("Author", open), "editor": pointer("_User", bob.id),
                                          "tags": [pointer("Author", open), pointer("Author", secret), "plain"]])
        let hidden = try create(h, "Post", ["title": "Second", "author": pointer("Author", secret)])
        _ = try create(h, "Comment", ["text": "nice", "post": pointer("Post", post)])

        // Comma-separated keys; an array of pointers keeps what the reader can read.
        var rows = results(try h.call("GET", "/parse/classes/Post" + query(["include": "author,tags", "order": "title"]), token: alice.token))
        XCTAssertEqual(rows.count, 2)
        let author = rows[0]["author"] as? [String: Any]
        XCTAssertEqual(author?["__type"] as? String, "Object")
        XCTAssertEqual(author?["className"] as? String, "Author")
        XCTAssertEqual(author?["name"] as? String, "Open")
        let tags = rows[0]["tags"] as? [Any] ?? []
        XCTAssertEqual(tags.count, 2, "the unreadable element is left out: \(tags)")
        XCTAssertEqual((tags.first as? [String: Any])?["name"] as? String, "Open")
        XCTAssertEqual(tags.last as? String, "plain")
        // An unreadable single pointer: the member is left out (Parse Server's replacePointers).
        XCTAssertEqual(rows[1]["objectId"] as? String, hidden)
        XCTAssertNil(rows[1]["author"], "\(rows[1])")
        // Its reader and the master key see it.
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["include": "author", "where": jsonText(["objectId": hidden])]), token: bob.token))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["name"] as? String, "Secret")
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["include": "author", "where": jsonText(["objectId": hidden])]), master: true))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["name"] as? String, "Secret")
        // Anonymous readers see only public targets.
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["include": "tags", "where": jsonText(["objectId": post])])))
        XCTAssertEqual((rows.first?["tags"] as? [Any])?.count, 2)

        // The JS SDK's POST form with a JSON array, and the string form in a body.
        rows = results(try h.call("POST", "/parse/classes/Post", body: ["_method": "GET", "include": ["author", "editor"], "where": ["objectId": post]], token: alice.token))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["name"] as? String, "Open")
        XCTAssertEqual((rows.first?["editor"] as? [String: Any])?["username"] as? String, "bob")
        rows = results(try h.call("POST", "/parse/classes/Post", body: ["_method": "GET", "include": "author", "where": ["objectId": post]], token: alice.token))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["className"] as? String, "Author")

        // Dotted paths include every level.
        rows = results(try h.call("GET", "/parse/classes/Comment" + query(["include": "post.author"]), token: alice.token))
        let included = rows.first?["post"] as? [String: Any]
        XCTAssertEqual(included?["title"] as? String, "First")
        XCTAssertEqual((included?["author"] as? [String: Any])?["name"] as? String, "Open")

        // `*` includes every pointer (and arrays of pointers) at the top level.
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["include": "*", "where": jsonText(["objectId": post])]), token: alice.token))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["__type"] as? String, "Object")
        XCTAssertEqual((rows.first?["editor"] as? [String: Any])?["__type"] as? String, "Object")
        XCTAssertEqual((rows.first?["tags"] as? [Any])?.count, 2)
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["includeAll": "true", "where": jsonText(["objectId": post])]), token: alice.token))
        XCTAssertEqual((rows.first?["author"] as? [String: Any])?["__type"] as? String, "Object")

        // A `_User` target hides what every user read hides: another user's email, and never
        // a password, auth data or session token.
        let editor = (results(try h.call("GET", "/parse/classes/Post" + query(["include": "editor", "where": jsonText(["objectId": post])]), token: alice.token)).first?["editor"]) as? [String: Any]
        XCTAssertEqual(editor?["username"] as? String, "bob")
        XCTAssertNil(editor?["email"])
        for hiddenField in ["password", "sessionToken", "authData", "_hashed_password"] { XCTAssertNil(editor?[hiddenField], hiddenField) }
        let own = (results(try h.call("GET", "/parse/classes/Post" + query(["include": "editor", "where": jsonText(["objectId": post])]), token: bob.token)).first?["editor"]) as? [String: Any]
        XCTAssertEqual(own?["email"] as? String, "bob@example.com")
        XCTAssertNil(own?["sessionToken"])

        // Fetches include too: GET /classes/X/:id and /users/me.
        let fetched = try h.call("GET", "/parse/classes/Post/\(post)" + query(["include": "author"]), token: alice.token)
        XCTAssertEqual((fetched["author"] as? [String: Any])?["name"] as? String, "Open", "\(fetched.json ?? "")")
        XCTAssertEqual(try h.call("PUT", "/parse/users/\(alice.id)", body: ["favorite": pointer("Author", open)], token: alice.token).status, 200)
        let me = try h.call("GET", "/parse/users/me" + query(["include": "favorite"]), token: alice.token)
        XCTAssertEqual((me["favorite"] as? [String: Any])?["name"] as? String, "Open", "\(me.json ?? "")")
        XCTAssertEqual(me["sessionToken"] as? String, alice.token)
        XCTAssertEqual((try h.call("GET", "/parse/users/me", token: alice.token)["favorite"] as? [String: Any])?["__type"] as? String, "Pointer")
        let user = try h.call("GET", "/parse/users/\(alice.id)" + query(["include": "favorite"]), token: alice.token)
        XCTAssertEqual((user["favorite"] as? [String: Any])?["name"] as? String, "Open")

        // Dotted keys restrict included objects (and include their parent); excludeKeys.
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["keys": "title,author.name", "where": jsonText(["objectId": post])]), token: alice.token))
        XCTAssertEqual(rows.first?["title"] as? String, "First")
        XCTAssertNil(rows.first?["tags"])
        let reduced = rows.first?["author"] as? [String: Any]
        XCTAssertEqual(reduced?["name"] as? String, "Open")
        XCTAssertEqual(reduced?["objectId"] as? String, open)
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["excludeKeys": "title,tags", "include": "author", "where": jsonText(["objectId": post])]), token: alice.token))
        XCTAssertNil(rows.first?["title"])
        XCTAssertNil(rows.first?["tags"])
        XCTAssertNotNil(rows.first?["editor"])
        XCTAssertNotNil(rows.first?["objectId"])
        rows = results(try h.call("GET", "/parse/classes/Post" + query(["excludeKeys": "author.name", "where": jsonText(["objectId": post])]), token: alice.token))
        let withoutName = rows.first?["author"] as? [String: Any]
        XCTAssertEqual(withoutName?["__type"] as? String, "Object")
        XCTAssertNil(withoutName?["name"])
        let single = try h.call("GET", "/parse/classes/Post/\(post)" + query(["excludeKeys": "title"]), token: alice.token)
        XCTAssertNil(single["title"])
        XCTAssertEqual(single["objectId"] as? String, post)
        await h.shutdown()
    }

    func testIncludesTakeOneStatementPerPathNotPerRow() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        var requests: [[String: Any]] = []
        for index in 0..<40 {
            requests.append(["method": "POST", "path": "/parse/classes/Writer", "body": ["name": "w\(index)"]])
        }
        let writers = (try h.call("POST", "/parse/batch", body: ["requests": requests], master: true).json as? [[String: Any]] ?? [])
            .compactMap { ($0["success"] as? [String: Any])?["objectId"] as? String }
        XCTAssertEqual(writers.count, 40)
        requests = (0..<40).map { index in
            ["method": "POST", "path": "/parse/classes/Book", "body": ["n": index, "writer": pointer("Writer", writers[index]),
                                                                    "reviewer": pointer("_User", alice.id)]]
        }
        XCTAssertEqual(try h.call("POST", "/parse/batch", body: ["requests": requests], master: true).status, 200)
        let path = "/parse/classes/Book"
        func statements(_ parameters: [String: String]) throws -> (Int, [[String: Any]]) {
            let before = h.database.stats.statementsSent
            let rows = results(try h.call("GET", path + query(parameters), token: alice.token))
            return (h.database.stats.statementsSent - before, rows)
        }
        _ = try statements(["limit": "100"])
        _ = try statements(["limit": "100", "include": "writer,reviewer"])  // learns Writer's (no) Relation fields
        let (plain, plainRows) = try statements(["limit": "100"])
        let (included, rows) = try statements(["limit": "100", "include": "writer,reviewer"])
        XCTAssertEqual(plainRows.count, 40)
        XCTAssertEqual(rows.count, 40)
        XCTAssertEqual(rows.compactMap { ($0["writer"] as? [String: Any])?["name"] as? String }.count, 40)
        XCTAssertEqual(rows.compactMap { ($0["reviewer"] as? [String: Any])?["username"] as? String }.count, 40)
        XCTAssertEqual(included - plain, 2, "one statement per include path for 40 rows (\(plain) without include, \(included) with)")
        await h.shutdown()
    }

    func testIncludeBoundsAndBadInput() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        _ = try create(h, "Thing", ["name": "x"])
        let many = (0..<1000).map { "field\($0)" }.joined(separator: ",")
        for (parameters, code) in [(["include": many], 102), (["include": "a.b.c.d.e.f"], 102), (["include": "bad-name"], 102),
                                   (["keys": "a..b"], 102), (["excludeKeys": "$x"], 102)] as [([String: String], Int)] {
            let reply = try h.call("GET", "/parse/classes/Thing" + query(parameters), token: alice.token)
            XCTAssertEqual(reply.status, 400, "\(parameters)")
            XCTAssertEqual(reply.code, code, "\(parameters): \(reply.json ?? "")")
        }
        XCTAssertEqual(try h.call("GET", "/parse/classes/Thing" + query(["include": "a.b.c.d.e"]), token: alice.token).status, 200, "depth 5 is allowed")
        XCTAssertEqual(try h.call("POST", "/parse/classes/Thing", body: ["_method": "GET", "include": [1, 2]], token: alice.token).code, 102)
        XCTAssertEqual(try h.call("POST", "/parse/classes/Thing", body: ["_method": "GET", "include": Array(repeating: "a", count: 1001)], token: alice.token).code, 102)
        XCTAssertEqual(try h.call("GET", "/parse/users/me" + query(["include": many]), token: alice.token).code, 102)
        XCTAssertEqual(try h.call("GET", "/parse/users/me" + query(["other": "1"]), token: alice.token).status, 200, "/users/me ignores other parameters")
        // Including a field that holds no pointer changes nothing.
        let rows = results(try h.call("GET", "/parse/classes/Thing" + query(["include": "name"]), token: alice.token))
        XCTAssertEqual(rows.first?["name"] as? String, "x")
        await h.shutdown()
    }
}
