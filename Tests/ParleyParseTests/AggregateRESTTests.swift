import Foundation
import XCTest

/// `GET /aggregate/:className` over HTTP and PostgreSQL: `distinct` and the pipeline stages
/// `$match`, `$group`, `$project`, `$sort`, `$skip`, `$limit`, `$count`, master key only, with
/// Parse's errors for malformed and unsupported stages (never a 500).
final class AggregateRESTTests: XCTestCase {
    private func aggregate(_ h: ParseHarness, _ parameters: [String: Any], on className: String = "Score", master: Bool = true,
                           token: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> [Any] {
        let reply = try h.call("GET", "/parse/aggregate/\(className)" + query(parameters.mapValues { $0 as? String ?? jsonText($0) }),
                               token: token, master: master)
        XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")", file: file, line: line)
        return reply["results"] as? [Any] ?? []
    }

    private func seed(_ h: ParseHarness) throws {
        for (player, points, tags) in [("a", 10, ["x", "y"]), ("b", 5, ["y"]), ("a", 20, []), ("c", 1, ["z", "x"]), ("b", 7, ["y"])] {
            let reply = try h.call("POST", "/parse/classes/Score", body: ["player": player, "points": points, "tags": tags,
                                                                           "ACL": ["role:Nobody": ["read": true]]])
            XCTAssertEqual(reply.status, 201, "\(reply.json ?? "")")
        }
    }

    func testDistinctValuesFlattenArraysAndFollowWhere() async throws {
        let h = try await ParseHarness()
        try seed(h)
        XCTAssertEqual(try aggregate(h, ["distinct": "player"]) as? [String], ["a", "b", "c"], "private objects too: the master key reads all")
        XCTAssertEqual(try aggregate(h, ["distinct": "tags"]) as? [String], ["x", "y", "z"])
        XCTAssertEqual(try aggregate(h, ["distinct": "player", "where": ["points": ["$gt": 6]]]) as? [String], ["a", "b"])
        XCTAssertEqual(try aggregate(h, ["distinct": "missing"]).count, 0)
        await h.shutdown()
    }

    func testGroupSortLimitProjectSkipAndCountStages() async throws {
        let h = try await ParseHarness()
        try seed(h)
        let groups = try aggregate(h, ["pipeline": [
            ["$group": ["_id": "$player", "total": ["$sum": "$points"], "games": ["$sum": 1], "mean": ["$avg": "$points"],
                        "best": ["$max": "$points"], "worst": ["$min": "$points"]]],
            ["$sort": ["total": -1]],
        ]]) as? [[String: Any]] ?? []
        XCTAssertEqual(groups.map { $0["objectId"] as? String }, ["a", "b", "c"])
        XCTAssertEqual(groups.map { $0["total"] as? Int }, [30, 12, 1])
        XCTAssertEqual(groups.map { $0["games"] as? Int }, [2, 2, 1])
        XCTAssertEqual(groups.map { $0["mean"] as? Double }, [15, 6, 1])
        XCTAssertEqual(groups.map { $0["best"] as? Int }, [20, 7, 1])
        XCTAssertEqual(groups.map { $0["worst"] as? Int }, [10, 5, 1])

        // $match first (with the query compiler's operators), then group everything, $limit.
        let matched = try aggregate(h, ["pipeline": [["$match": ["player": ["$in": ["a", "c"]]]], ["$group": ["_id": NSNull(), "n": ["$sum": 1]]]]])
        XCTAssertEqual((matched.first as? [String: Any])?["n"] as? Int, 3)
        XCTAssertTrue((matched.first as? [String: Any])?["objectId"] is NSNull)
        let top = try aggregate(h, ["pipeline": [["$sort": ["points": -1]], ["$limit": 2], ["$project": ["points": 1]]]]) as? [[String: Any]] ?? []
        XCTAssertEqual(top.map { $0["points"] as? Int }, [20, 10])
        XCTAssertEqual(top.map { Set($0.keys) }, [["objectId", "points"], ["objectId", "points"]])
        let skipped = try aggregate(h, ["pipeline": #"{"$sort":{"points":1},"$skip":3}"#]) as? [[String: Any]] ?? []
        XCTAssertEqual(skipped.map { $0["points"] as? Int }, [10, 20], "the object form of pipeline")
        let excluded = try aggregate(h, ["pipeline": [["$project": ["tags": 0, "ACL": 0]], ["$limit": 1]]]) as? [[String: Any]] ?? []
        XCTAssertNil(excluded.first?["tags"])
        XCTAssertNotNil(excluded.first?["points"])
        let counted = try aggregate(h, ["pipeline": [["$match": ["points": ["$gte": 7]]], ["$count": "many"]]])
        XCTAssertEqual((counted.first as? [String: Any])?["many"] as? Int, 3)
        // A compound key with a date part, as Parse Server's Postgres adapter groups.
        let byYear = try aggregate(h, ["pipeline": [["$group": ["_id": ["year": ["$year": "$createdAt"], "player": "$player"], "n": ["$sum": 1]]],
                                                     ["$sort": ["n": -1]], ["$limit": 1]]]) as? [[String: Any]] ?? []
        let key = byYear.first?["objectId"] as? [String: Any]
        XCTAssertEqual(key?["year"] as? Int, Calendar(identifier: .gregorian).component(.year, from: Date()))
        // _User documents: typed columns, never the password.
        _ = try h.signUp("zed")
        let users = try aggregate(h, ["pipeline": [["$project": ["username": 1, "password": 1]]]], on: "_User") as? [[String: Any]] ?? []
        XCTAssertEqual(users.first?["username"] as? String, "zed")
        XCTAssertNil(users.first?["password"])
        await h.shutdown()
    }

    func testMasterKeyOnlyAndMalformedPipelinesAre102NeverA500() async throws {
        let h = try await ParseHarness()
        try seed(h)
        let user = try h.signUp("u")
        for token in [user.token, nil] {
            let refused = try h.call("GET", "/parse/aggregate/Score" + query(["distinct": "player"]), token: token)
            XCTAssertEqual(refused.status, 403)
            XCTAssertEqual(refused["error"] as? String, "unauthorized: master key is required")
        }
        let bad: [(String, [String: String], String?)] = [
            ("$unwind", ["pipeline": jsonText([["$unwind": "$tags"]])], "Unsupported aggregate stage $unwind"),
            ("$lookup", ["pipeline": jsonText([["$lookup": ["from": "x"]]])], "Unsupported aggregate stage $lookup"),
            ("two keys", ["pipeline": jsonText([["$limit": 1, "$skip": 1]])], nil),
            ("no $", ["pipeline": jsonText([["group": ["_id": "$player"]]])], "Invalid aggregate stage 'group'."),
            ("no _id", ["pipeline": jsonText([["$group": ["n": ["$sum": 1]]]])], "Invalid parameter for query: group. Missing key _id"),
            ("objectId", ["pipeline": jsonText([["$group": ["_id": "$player", "objectId": "$player"]]])], "Cannot use 'objectId' in aggregation stage $group."),
            ("limit", ["pipeline": jsonText([["$limit": "x"]])], nil),
            ("negative skip", ["pipeline": jsonText([["$skip": -1]])], nil),
            ("late match", ["pipeline": jsonText([["$group": ["_id": "$player"]], ["$match": ["objectId": "a"]]])], nil),
            ("accumulator", ["pipeline": jsonText([["$group": ["_id": "$player", "x": ["$first": "$points"]]]])], nil),
            ("field ref", ["pipeline": jsonText([["$group": ["_id": "player; drop"]]])], nil),
            ("sort", ["pipeline": jsonText([["$sort": ["points": 2]]])], nil),
            ("project expr", ["pipeline": jsonText([["$project": ["p": ["$add": [1, 2]]]]])], nil),
            ("mixed project", ["pipeline": jsonText([["$project": ["a": 1, "b": 0]]])], nil),
            ("bad where op", ["pipeline": jsonText([["$match": ["points": ["$bogus": 1]]]])], nil),
            ("distinct", ["distinct": "bad name!"], nil),
            ("parameter", ["limit": "5"], nil),
            ("explain", ["explain": "true", "distinct": "player"], nil),
            ("many stages", ["pipeline": jsonText(Array(repeating: ["$limit": 5], count: 33))], nil),
        ]
        for (name, parameters, message) in bad {
            let reply = try h.call("GET", "/parse/aggregate/Score" + query(parameters), master: true)
            XCTAssertEqual(reply.status, 400, "\(name): \(reply.json ?? "")")
            XCTAssertEqual(reply.code, 102, "\(name): \(reply.json ?? "")")
            if let message { XCTAssertEqual(reply["error"] as? String, message, name) }
        }
        let invalid = try h.call("GET", "/parse/aggregate/Score" + query(["pipeline": "[{"]), master: true)
        XCTAssertEqual(invalid.code, 107)
        XCTAssertEqual(try h.call("GET", "/parse/aggregate/bad%20class" + query(["distinct": "x"]), master: true).status, 400)
        // Non-number values are skipped by the arithmetic accumulators rather than failing the cast.
        XCTAssertEqual(try h.call("POST", "/parse/classes/Score", body: ["player": "d", "points": "lots"]).status, 400, "schema: Number")
        XCTAssertEqual(try aggregate(h, ["pipeline": [["$group": ["_id": "$tags", "n": ["$sum": "$player"]]]]]).count, 4, "still serving")
        await h.shutdown()
    }
}
