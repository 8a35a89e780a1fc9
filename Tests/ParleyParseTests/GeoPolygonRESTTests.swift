import Foundation
import XCTest

/// `$geoWithin: {"$polygon": …}` on a GeoPoint field over HTTP and PostgreSQL (Parse Server's
/// Postgres adapter: `point <@ polygon`), and its errors.
final class GeoPolygonRESTTests: XCTestCase {
    private func geo(_ latitude: Double, _ longitude: Double) -> [String: Any] { ["__type": "GeoPoint", "latitude": latitude, "longitude": longitude] }

    func testPointsInsideAPolygonAreFoundAndBadPolygonsAre102() async throws {
        let h = try await ParseHarness()
        for (name, latitude, longitude) in [("inside", 1.0, 1.0), ("edge", 0.0, 1.0), ("outside", 3.0, 3.0), ("notch", 1.5, 1.9)] {
            XCTAssertEqual(try h.call("POST", "/parse/classes/Place", body: ["name": name, "location": geo(latitude, longitude)]).status, 201)
        }
        XCTAssertEqual(try h.call("POST", "/parse/classes/Place", body: ["name": "nowhere"]).status, 201)
        func names(_ polygon: Any) throws -> [String] {
            let reply = try h.call("GET", "/parse/classes/Place" + query(["where": jsonText(["location": ["$geoWithin": ["$polygon": polygon]]])]))
            XCTAssertEqual(reply.status, 200, "\(reply.json ?? "")")
            return ((reply["results"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }.sorted()
        }
        // A concave polygon: the square (0,0)-(2,2) without the triangle cut from its top right.
        let concave = [geo(0, 0), geo(0, 2), geo(1, 2), geo(2, 1), geo(2, 0)]
        XCTAssertEqual(try names(concave), ["edge", "inside"], "the notch is outside, the edge inside")
        XCTAssertEqual(try names([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [0.0, 4.0]]), ["edge", "inside", "notch", "outside"], "[longitude, latitude] pairs")
        XCTAssertEqual(try names(["__type": "Polygon", "coordinates": [[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0]]]), ["edge", "inside", "notch"])
        for bad: Any in [[geo(0, 0), geo(1, 1)], "square", [geo(0, 0), geo(1, 1), geo(95, 0)], [geo(0, 0), geo(1, 1), "x"],
                         ["__type": "Polygon", "coordinates": [[0.0, 0.0]]], Array(repeating: geo(0, 0), count: 1001)] {
            let reply = try h.call("POST", "/parse/classes/Place", body: ["_method": "GET", "where": ["location": ["$geoWithin": ["$polygon": bad]]]])
            XCTAssertEqual(reply.code, 102, "\(bad): \(reply.json ?? "")")
        }
        let other = try h.call("GET", "/parse/classes/Place" + query(["where": jsonText(["name": ["$geoWithin": ["$polygon": concave]]])]))
        XCTAssertEqual((other["results"] as? [Any])?.count, 0, "another field is not the GeoPoint: nothing matches")
        await h.shutdown()
    }
}
