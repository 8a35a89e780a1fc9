import Foundation
import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

/// 10,000 seeded users: the compiled geo queries return exactly the users a brute-force
/// haversine says are within the radius, nearest first for `$nearSphere`.
///
/// Radii: Parse converts kilometres to a central angle with 6371 km per radian, and the compiler
/// compares `earth_distance` with that angle times `earth()`, so a user matches exactly when its
/// central angle to the centre is at most `km / 6371`. The brute force below computes that angle
/// with the haversine formula; the Earth radius cancels out (any radius gives the same set).
final class QueryNearbyTests: XCTestCase {
    private static let center = (latitude: 52.52, longitude: 13.405)
    private static let userCount = 10_000
    private static let seeded: Result<Seeded, Error> = Result { try seed() }

    private struct Seeded: @unchecked Sendable {
        let db: QueryTestDatabase
        /// id → (latitude, longitude) in degrees.
        let points: [String: (Double, Double)]
    }

    /// SplitMix64: a fixed seed gives the same users on every run.
    private struct SplitMix64 {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        /// Uniform in [-1, 1).
        mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 52) - 1 }
    }

    private static func seed() throws -> Seeded {
        let db = try QueryTestDatabase(prefix: "query_nearby")
        var random = SplitMix64(state: 20_240_601)
        var ids: [String] = [], latitudes: [String] = [], longitudes: [String] = []
        var points: [String: (Double, Double)] = [:]
        for index in 0..<userCount {
            // 40% in a dense ±3.3 km core, the rest spread over ±17 km.
            let (latitudeSpan, longitudeSpan) = index % 5 < 2 ? (0.03, 0.05) : (0.15, 0.25)
            let latitude = center.latitude + random.unit() * latitudeSpan
            let longitude = center.longitude + random.unit() * longitudeSpan
            let id = "n" + String(index)
            ids.append(id)
            latitudes.append(latitude.description)
            longitudes.append(longitude.description)
            points[id] = (latitude, longitude)
        }
        try db.connection.query("""
            INSERT INTO users (object_id, username, data, geo)
            SELECT id, id, jsonb_build_object('location', jsonb_build_object('__type', 'GeoPoint', 'latitude', lat, 'longitude', lng)),
                   ll_to_earth(lat, lng)
            FROM unnest($1::text[], $2::float8[], $3::float8[]) AS u(id, lat, lng)
            """, [.textArray(ids), .text("{" + latitudes.joined(separator: ",") + "}"), .text("{" + longitudes.joined(separator: ",") + "}")])
        try db.connection.execute("ANALYZE users")
        return Seeded(db: db, points: points)
    }

    /// Central angle between two points, in radians (haversine).
    private static func angle(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
        let phi1 = a.0 * .pi / 180, phi2 = b.0 * .pi / 180
        let dPhi = phi2 - phi1, dLambda = (b.1 - a.1) * .pi / 180
        let h = sin(dPhi / 2) * sin(dPhi / 2) + cos(phi1) * cos(phi2) * sin(dLambda / 2) * sin(dLambda / 2)
        return 2 * asin(min(1, sqrt(h)))
    }

    /// Every page of a query (limit 1000, skip 0, 1000, …) as (id, angle to the centre).
    private func allPages(_ whereJSON: String, _ seeded: Seeded) throws -> [(String, Double)] {
        var result: [(String, Double)] = []
        var skip = 0
        while true {
            let page = try seeded.db.ids(whereJSON, limit: "1000", skip: String(skip), readers: [])
            result += page.map { ($0, Self.angle(Self.centerPoint, seeded.points[$0]!)) }
            if page.count < 1000 { return result }
            skip += 1000
        }
    }

    private static var centerPoint: (Double, Double) { (center.latitude, center.longitude) }

    /// Ids the brute force puts within `radians`, and ids too close to the boundary to judge
    /// (within 1e-6 relative: float rounding in earthdistance vs haversine may go either way).
    private func bruteForce(radians: Double, _ seeded: Seeded) -> (inside: Set<String>, boundary: Set<String>) {
        var inside = Set<String>(), boundary = Set<String>()
        for (id, point) in seeded.points {
            let angle = Self.angle(Self.centerPoint, point)
            if abs(angle / radians - 1) < 1e-6 {
                boundary.insert(id)
            } else if angle <= radians {
                inside.insert(id)
            }
        }
        return (inside, boundary)
    }

    private func check(kilometers: Double) throws {
        let seeded = try Self.seeded.get()
        let radians = kilometers / 6371
        let expected = bruteForce(radians: radians, seeded)
        XCTAssertGreaterThan(expected.inside.count, 100, "the seed puts enough users inside \(kilometers) km")

        let point = #"{"__type":"GeoPoint","latitude":\#(Self.center.latitude),"longitude":\#(Self.center.longitude)}"#
        let near = try allPages(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":\#(kilometers)}}"#, seeded)
        let nearIDs = Set(near.map(\.0)).subtracting(expected.boundary)
        XCTAssertEqual(near.count, Set(near.map(\.0)).count, "no user twice across pages")
        XCTAssertEqual(nearIDs, expected.inside, "$nearSphere within \(kilometers) km")
        for (previous, next) in zip(near, near.dropFirst()) {
            XCTAssertLessThanOrEqual(previous.1, next.1 + 1e-12, "nearest first: \(previous.0) before \(next.0)")
        }

        let sphere = try allPages(#"{"location":{"$geoWithin":{"$centerSphere":[[\#(Self.center.longitude),\#(Self.center.latitude)],\#(radians)]}}}"#, seeded)
        XCTAssertEqual(Set(sphere.map(\.0)).subtracting(expected.boundary), expected.inside, "$centerSphere of \(kilometers) km")
        XCTAssertEqual(sphere.count, Set(sphere.map(\.0)).count)

        let count = try seeded.db.count(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":\#(kilometers)}}"#, readers: [])
        XCTAssertEqual(count - expected.boundary.intersection(Set(near.map(\.0))).count, expected.inside.count)
    }

    func testNearbyWithinOneKilometerMatchesBruteForceNearestFirst() throws {
        try check(kilometers: 1)
    }

    func testNearbyWithinFiveKilometersMatchesBruteForceAcrossPages() throws {
        try check(kilometers: 5)
    }

    /// The nearest-first statement compares the index's chord distance with the chord of the
    /// angle; it keeps exactly the rows earthdistance's `earth_distance(…) <= θ * earth()` keeps,
    /// with no allowance at the boundary, in the same order.
    func testNearestFirstKeepsExactlyTheRowsEarthDistanceKeeps() throws {
        let seeded = try Self.seeded.get()
        let point = #"{"__type":"GeoPoint","latitude":\#(Self.center.latitude),"longitude":\#(Self.center.longitude)}"#
        for kilometers in [0.05, 0.3, 1, 2.5] {
            let near = try allPages(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":\#(kilometers)}}"#, seeded)
            let rows = try seeded.db.connection.query("""
                SELECT object_id FROM users WHERE earth_distance(ll_to_earth($1::float8, $2::float8), geo) <= $3::float8 * earth()
                ORDER BY geo <-> ll_to_earth($1::float8, $2::float8), object_id
                """, [.double(Self.center.latitude), .double(Self.center.longitude), .double(kilometers / 6371)])
            XCTAssertEqual(near.map(\.0), rows.map { $0["object_id"].string ?? "" }, "\(kilometers) km")
        }
    }

    func testNearestFirstFromHalfTheGlobeOnTakesEveryone() throws {
        let seeded = try Self.seeded.get()
        // A centre on the other side of the Earth: every user is π minus at most 0.003 radians away.
        let point = #"{"__type":"GeoPoint","latitude":\#(-Self.center.latitude),"longitude":\#(Self.center.longitude - 180)}"#
        for radians in [Double.pi, 3.5, 10] {
            let ids = try seeded.db.ids(#"{"location":{"$nearSphere":\#(point),"$maxDistance":\#(radians)}}"#, limit: "1000", readers: [])
            XCTAssertEqual(ids.count, 1000, "$maxDistance \(radians): a full page")
        }
        XCTAssertEqual(try seeded.db.ids(#"{"location":{"$nearSphere":\#(point),"$maxDistance":3.1}}"#, readers: []), [],
                       "nobody is within 3.1 radians of the antipode")
    }

    func testEarthRadiusIsTheOneTheCompilerAssumes() throws {
        let seeded = try Self.seeded.get()
        // The compiler scales angles by earth() in SQL, so any radius works; this pins the
        // documented value.
        XCTAssertEqual(try seeded.db.connection.query("SELECT earth() AS r").first?["r"].double, 6_378_168)
    }
}
