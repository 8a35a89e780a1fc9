import Foundation
import XCTest

/// `$text` with `$search` over HTTP and PostgreSQL (`to_tsvector … @@ to_tsquery …`, as Parse
/// Server's Postgres adapter), `order=$score` and `keys=$score`, and Parse's errors for the
/// options it refuses; an invalid tsquery is 102, never a 500.
final class TextSearchRESTTests: XCTestCase {
    private func find(_ h: ParseHarness, _ parameters: [String: String], file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        let reply = try h.call("GET", "/parse/classes/Post" + query(parameters))
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")", file: file, line: line)
        return reply["results"] as? [[String: Any]] ?? []
    }

    private func search(_ term: Any, _ options: [String: Any] = [:]) -> String {
        var search: [String: Any] = ["$term": term]
        for (key, value) in options { search[key] = value }
        return jsonText(["subject": ["$text": ["$search": search]]])
    }

    func testTextSearchMatchesStemsOperatorsAndOrdersByScore() async throws {
        let h = try await ParseHarness()
        for subject in ["coffee shop", "Coffee and cake, coffee and more coffee", "tea time", "drinking coffees", "el café con leche"] {
            XCTAssertEqual(try h.call("POST", "/parse/classes/Post", body: ["subject": subject]).status, 201)
        }
        _ = try h.call("POST", "/parse/classes/Post", body: ["subject": 5, "other": "coffee"])
        func subjects(_ parameters: [String: String]) throws -> [String] { try find(h, parameters).compactMap { $0["subject"] as? String }.sorted() }
        XCTAssertEqual(try subjects(["where": search("coffee")]), ["Coffee and cake, coffee and more coffee", "coffee shop", "drinking coffees"],
                       "stemmed (english), case-insensitive, only the string field")
        XCTAssertEqual(try subjects(["where": search("coffee & cake")]), ["Coffee and cake, coffee and more coffee"])
        XCTAssertEqual(try subjects(["where": search("tea | shop")]), ["coffee shop", "tea time"])
        XCTAssertEqual(try subjects(["where": search("leche", ["$language": "spanish"])]), ["el café con leche"])
        XCTAssertEqual(try subjects(["where": search("coffee", ["$caseSensitive": false, "$diacriticSensitive": true])]).count, 3)
        // order=$score with keys=$score, as the SDKs' sortByTextScore sends it.
        let ranked = try find(h, ["where": search("coffee"), "order": "$score", "keys": "$score,subject"])
        XCTAssertEqual(ranked.first?["subject"] as? String, "Coffee and cake, coffee and more coffee")
        let scores = ranked.compactMap { $0["score"] as? Double }
        XCTAssertEqual(scores.count, 3)
        XCTAssertEqual(scores, scores.sorted(by: >))
        // Users: the username column.
        _ = try h.signUp("coffee lover")
        let users = try h.call("GET", "/parse/users" + query(["where": jsonText(["username": ["$text": ["$search": ["$term": "lover"]]]])]))
        XCTAssertEqual((users["results"] as? [[String: Any]])?.count, 1)
        await h.shutdown()
    }

    func testTextSearchRefusesWhatParseRefusesAndBadTermsAre102() async throws {
        let h = try await ParseHarness()
        XCTAssertEqual(try h.call("POST", "/parse/classes/Post", body: ["subject": "coffee"]).status, 201)
        let refused: [(String, String?)] = [
            (jsonText(["subject": ["$text": "coffee"]]), "bad $text: $search, should be object"),
            (jsonText(["subject": ["$text": ["$search": "coffee"]]]), "bad $text: $search, should be object"),
            (jsonText(["subject": ["$text": ["$search": ["$language": "english"]]]]), "bad $text: $term, should be string"),
            (search(5), "bad $text: $term, should be string"),
            (search("coffee", ["$language": 1]), "bad $text: $language, should be string"),
            (search("coffee", ["$language": "klingon"]), nil),
            (search("coffee", ["$caseSensitive": true]), "bad $text: $caseSensitive not supported, please use $regex or create a separate lower case column."),
            (search("coffee", ["$diacriticSensitive": false]), "bad $text: $diacriticSensitive - false not supported, install Postgres Unaccent Extension"),
            (search("coffee", ["$fuzzy": true]), nil),
            (search("coffee &"), nil),
            (search("((coffee"), nil),
            (search(String(repeating: "a", count: 2000)), nil),
        ]
        for (whereText, message) in refused {
            let reply = try h.call("GET", "/parse/classes/Post" + query(["where": whereText]))
            XCTAssertEqual(reply.code, 102, "\(whereText): \(reply.json ?? "")")
            if let message { XCTAssertEqual(reply["error"] as? String, message) }
        }
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post" + query(["order": "$score"])).code, 102, "no $text to rank by")
        XCTAssertEqual(try h.call("GET", "/parse/classes/Post" + query(["keys": "$score"])).code, 102)
        XCTAssertEqual(try find(h, ["where": search("coffee")]).count, 1, "still serving")
        await h.shutdown()
    }
}
