import Foundation
import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// Answers of any size with bounded memory: finds streamed from a cursor, large whole answers
/// sent in slices, and the answer, object and batch limits (docs/rest-api.md, "Answer sizes").
final class ParseAnswerBoundsTests: XCTestCase {
    /// Inserts `count` public objects of `className` with a `blob` of `blobBytes` bytes each
    /// (object ids `o000001`…, `n` 1…count, an `owner` pointer to `_User/<owner>` when given).
    static func seed(_ h: ParseHarness, className: String, count: Int, blobBytes: Int, owner: String? = nil) async throws {
        let ownerSQL = owner.map { "'owner', jsonb_build_object('__type', 'Pointer', 'className', '_User', 'objectId', '\($0)')," } ?? ""
        try await h.database.query("""
            INSERT INTO objects (class_name, object_id, acl, data)
            SELECT $1, 'o' || lpad(i::text, 6, '0'), '{"*":{"read":true}}',
                   jsonb_build_object(\(ownerSQL) 'n', i, 'half', i / 2.0, 'tag', 'é"\\u0001' || i, 'blob', repeat('x', $2::int))
            FROM generate_series(1, $3::int) AS i
            """, [.text(className), .text(String(blobBytes)), .text(String(count))])
    }

    /// The same find, read through a cursor and page by page (the pooled client, limit over
    /// 100) and in one statement (a transaction), gives the same bytes, plain and shaped, with
    /// and without `count`; over HTTP it is chunked and carries those bytes.
    func testStreamedFindEqualsBufferedFind() async throws {
        let h = try await ParseHarness()
        let alice = try h.signUp("alice")
        try await Self.seed(h, className: "Row", count: 900, blobBytes: 3000, owner: alice.id)
        let runner = QueryRunner(schemas: h.api.accounts.schemas)
        let order = [ParseQuery.OrderKey(field: "n")]
        let queries = [
            ParseQuery(className: "Row", order: order, limit: 900),
            ParseQuery(className: "Row", order: order, limit: 700, skip: 3, count: true),
            try ParseQuery.fromRequest(className: "Row", parameters: [("limit", "900"), ("order", "-n"), ("include", "owner")]),
            try ParseQuery.fromRequest(className: "Row", parameters: [("limit", "500"), ("order", "n"), ("excludeKeys", "blob")]),
        ]
        for (index, query) in queries.enumerated() {
            let answer = try await runner.findAnswer(query, auth: .anonymous, on: h.database)
            guard case .pages(let pages) = answer else { return XCTFail("a find of \(query.limit) rows should stream") }
            var chunks = 0
            var streamed: [UInt8] = []
            while let chunk = try await pages.next() {
                chunks += 1
                streamed += chunk
            }
            // The rows with their 3 KB blob come in pages of about 512 KiB.
            if index < 3 { XCTAssertGreaterThan(chunks, 3, "\(query)") }
            let buffered = try await h.database.transaction { tx in try await runner.find(query, auth: .anonymous, on: tx) }
            XCTAssertEqual(streamed.count, buffered.count)
            XCTAssertTrue(streamed == buffered, "streamed and buffered bytes differ for \(query)")
            let object = try JSONSerialization.jsonObject(with: Data(streamed)) as? [String: Any]
            XCTAssertEqual((object?["results"] as? [Any])?.count, min(query.limit, 900 - query.skip))
        }
        XCTAssertEqual(h.database.stats.openCursors, 0)

        let http = try h.call("GET", "/parse/classes/Row" + query(["limit": "900", "order": "n"]))
        XCTAssertEqual(http.status, 200)
        XCTAssertEqual(http.header("Transfer-Encoding"), "chunked")
        let direct = try await runner.find(ParseQuery(className: "Row", order: order, limit: 900), auth: .anonymous, on: h.database)
        XCTAssertTrue(http.body == direct, "the HTTP answer carries the streamed bytes")
        let included = try h.call("GET", "/parse/classes/Row" + query(["limit": "300", "order": "n", "include": "owner"]))
        let first = (included["results"] as? [[String: Any]])?.first
        XCTAssertEqual((first?["owner"] as? [String: Any])?["username"] as? String, "alice")
        XCTAssertEqual((included["results"] as? [Any])?.count, 300)
        await h.shutdown()
    }

    /// 40 objects of 900 KB (a 36 MB answer, once cut off at the connection's 4 MiB output
    /// bound) arrive whole with the default limit, inline; the class's later finds stream from a
    /// cursor; a single 6 MB object arrives whole.
    func testLargeAnswersArriveWhole() async throws {
        let h = try await ParseHarness()
        try await Self.seed(h, className: "Photo", count: 40, blobBytes: 900_000)
        // A first small find caches the class: the next is answered inline (rows read whole,
        // written a chunk at a time), the one after it reads a cursor (the class had a large answer).
        XCTAssertEqual((try h.call("GET", "/parse/classes/Photo" + query(["limit": "1", "keys": "n"]))["results"] as? [Any])?.count, 1)
        for round in 0..<2 {
            let fullPathBefore = h.fullPath.requests
            let reply = try h.call("GET", "/parse/classes/Photo" + query(["order": "n"]))
            XCTAssertEqual(h.fullPath.requests - fullPathBefore, round, "round \(round): inline, then the full path's cursor")
            XCTAssertEqual(reply.status, 200)
            XCTAssertEqual(reply.header("Transfer-Encoding"), "chunked", "round \(round)")
            let results = reply["results"] as? [[String: Any]] ?? []
            XCTAssertEqual(results.count, 40, "round \(round)")
            XCTAssertEqual((results.last?["blob"] as? String)?.count, 900_000)
        }
        try await h.database.query("UPDATE objects SET data = jsonb_set(data, '{blob}', to_jsonb(repeat('y', 6000000))) WHERE class_name = 'Photo' AND object_id = 'o000001'")
        let single = try h.call("GET", "/parse/classes/Photo/o000001")
        XCTAssertEqual(single.status, 200)
        XCTAssertEqual(single.header("Content-Length").flatMap(Int.init), single.body.count)
        XCTAssertEqual((single["blob"] as? String)?.count, 6_000_000)
        XCTAssertEqual(h.database.stats.openCursors, 0)
        await h.shutdown()
    }

    /// `--max-object-size` refuses a larger write (116, nothing stored), in a batch too;
    /// `--max-answer-size` refuses a larger single object (116); a batch's answers together stay
    /// under it (the sub-request that does not fit answers 116 in its place); a streamed find is
    /// not bounded by it.
    func testObjectAndAnswerLimits() async throws {
        let h = try await ParseHarness(maxAnswerBytes: 64 << 10, maxObjectBytes: 16 << 10, maxBodyBytes: 1 << 20)
        let big = String(repeating: "z", count: 20_000)
        let refused = try h.call("POST", "/parse/classes/Doc", body: ["text": big])
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.code, 116, "\(refused.object)")
        let created = try h.call("POST", "/parse/classes/Doc", body: ["text": "small"])
        XCTAssertEqual(created.status, 201)
        let id = created["objectId"] as? String ?? ""
        let update = try h.call("PUT", "/parse/classes/Doc/\(id)", body: ["text": big])
        XCTAssertEqual(update.code, 116)
        let batchWrite = try h.call("POST", "/parse/batch", body: ["requests": [
            ["method": "POST", "path": "/parse/classes/Doc", "body": ["text": big]],
            ["method": "POST", "path": "/parse/classes/Doc", "body": ["text": "ok"]],
        ]])
        let writes = batchWrite.json as? [[String: Any]] ?? []
        XCTAssertEqual((writes.first?["error"] as? [String: Any])?["code"] as? Int, 116, "\(writes)")
        XCTAssertNotNil(writes.last?["success"])
        let stored = try h.call("GET", "/parse/classes/Doc" + query(["keys": "text"]))
        XCTAssertEqual((stored["results"] as? [[String: Any]])?.compactMap { $0["text"] as? String }.sorted(), ["ok", "small"])

        // Objects written behind the API's back: 30 KB each, so two fit in a 64 KiB answer, three do not.
        try await Self.seed(h, className: "Page", count: 300, blobBytes: 30_000)
        try await h.database.query("UPDATE objects SET data = jsonb_set(data, '{blob}', to_jsonb(repeat('w', 70000))) WHERE class_name = 'Page' AND object_id = 'o000300'")
        let tooBig = try h.call("GET", "/parse/classes/Page/o000300")
        XCTAssertEqual(tooBig.status, 400)
        XCTAssertEqual(tooBig.code, 116)
        XCTAssertEqual(try h.call("GET", "/parse/classes/Page/o000001").status, 200)
        let gets = (1...3).map { ["method": "GET", "path": "/parse/classes/Page/o00000\($0)"] }
        let batch = try h.call("POST", "/parse/batch", body: ["requests": gets])
        XCTAssertEqual(batch.status, 200)
        let answers = batch.json as? [[String: Any]] ?? []
        XCTAssertEqual(answers.count, 3)
        XCTAssertNotNil(answers[0]["success"])
        XCTAssertNotNil(answers[1]["success"])
        XCTAssertEqual((answers[2]["error"] as? [String: Any])?["code"] as? Int, 116, "\(answers[2])")
        XCTAssertLessThanOrEqual(batch.body.count, 64 << 10)
        let findInBatch = try h.call("POST", "/parse/batch", body: ["requests": [["method": "GET", "path": "/parse/classes/Page?limit=200"]]])
        XCTAssertEqual(((findInBatch.json as? [[String: Any]])?.first?["error"] as? [String: Any])?["code"] as? Int, 116)
        let transactional = try h.call("POST", "/parse/batch", body: ["requests": gets, "transaction": true])
        XCTAssertEqual(transactional.code, 116)
        // Streamed: 299 × 30 KB, far over the answer limit, arrives whole.
        let streamed = try h.call("GET", "/parse/classes/Page" + query(["limit": "299", "order": "n"]))
        XCTAssertEqual(streamed.status, 200)
        XCTAssertEqual((streamed["results"] as? [Any])?.count, 299)
        XCTAssertEqual(h.database.stats.openCursors, 0)
        await h.shutdown()
    }

    /// A client that goes away mid-answer: its cursor is closed and the pool keeps serving
    /// (plain statements and transactions) on every connection.
    func testClientGoneMidStreamClosesItsCursor() async throws {
        let h = try await ParseHarness()
        try await Self.seed(h, className: "Log", count: 1000, blobBytes: 20_000)
        for _ in 0..<4 {
            let client = try TestHTTPClient(port: h.server.port)
            try client.send("GET /parse/classes/Log?limit=1000&order=n HTTP/1.1\r\nHost: x\r\nX-Parse-Application-Id: \(h.appID)\r\n\r\n")
            var received = 0
            var buffer = [UInt8](repeating: 0, count: 65536)
            while received < 300_000 {
                let n = recv(client.fd, &buffer, buffer.count, 0)
                guard n > 0 else { break }
                received += n
            }
            XCTAssertGreaterThanOrEqual(received, 300_000)
            XCTAssertGreaterThan(h.database.stats.openCursors, 0, "the answer is still being read from its cursor")
            shutdown(client.fd, Int32(SHUT_RDWR))
        }
        let deadline = Date().addingTimeInterval(10)
        while h.database.stats.openCursors > 0 && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(h.database.stats.openCursors, 0, "every abandoned cursor is closed")
        let started = Date()
        for _ in 0..<20 {
            let reply = try h.call("GET", "/parse/classes/Log" + query(["limit": "2", "order": "n", "keys": "n"]))
            XCTAssertEqual((reply["results"] as? [Any])?.count, 2)
        }
        let batch = try h.call("POST", "/parse/batch", body: ["transaction": true, "requests": [["method": "POST", "path": "/parse/classes/Log", "body": ["n": -1]]]])
        XCTAssertNotNil((batch.json as? [[String: Any]])?.first?["success"], "\(batch.json ?? "")")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        await h.shutdown()
    }
}
