@testable import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

/// The SQL text and parameters the compiler emits, and the queries it refuses.
final class QueryCompilerTests: XCTestCase {
    private let standardUserColumns = "object_id, created_at, updated_at, acl, data, username, email, email_verified"

    private func compile(_ whereJSON: String, order: String? = nil, layout: TableLayout = .users,
                         readers: [String]? = nil) throws -> CompiledQuery {
        var parameters: [(name: String, value: String)] = [("where", whereJSON)]
        if let order { parameters.append(("order", order)) }
        let query = try ParseQuery.fromRequest(className: layout.className, parameters: parameters)
        return try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readers)
    }

    /// The predicate after `WHERE` (master key, so no ACL term), without ORDER BY/LIMIT.
    private func predicate(_ whereJSON: String) throws -> (String, [PostgresData]) {
        let compiled = try compile(whereJSON)
        let sql = compiled.sql
        guard let start = sql.range(of: " WHERE "), let end = sql.range(of: " ORDER BY ") else { return ("", compiled.parameters) }
        return (String(sql[start.upperBound..<end.lowerBound]), compiled.parameters)
    }

    private func assertRefused(_ whereJSON: String, code: Int = 102, mentioning text: String, layout: TableLayout = .users,
                               readers: [String]? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try compile(whereJSON, layout: layout, readers: readers), file: file, line: line) { error in
            guard let error = error as? QueryError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
            XCTAssertTrue(error.message.contains(text), "\(error.message) should mention \(text)", file: file, line: line)
        }
    }

    // MARK: - Whole statements

    func testUsernameLookup() throws {
        let compiled = try compile(#"{"username":"alice"}"#, readers: ["u1"])
        XCTAssertEqual(compiled.sql, "SELECT \(standardUserColumns) FROM users WHERE (rperm && $1::text[]) IS TRUE AND username = $2::text ORDER BY object_id LIMIT 100")
        XCTAssertEqual(compiled.parameters, [.textArray(["*", "u1"]), .text("alice")])
    }

    func testNearbyQuery() throws {
        let point = #"{"__type":"GeoPoint","latitude":48.85,"longitude":2.35}"#
        let compiled = try compile(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":1}}"#, readers: [])
        let center = "ll_to_earth($3::float8, $4::float8)"
        let centerCube = "cube(cube(cube(earth() * cos(radians($3::float8)) * cos(radians($4::float8))),"
            + " earth() * cos(radians($3::float8)) * sin(radians($4::float8))), earth() * sin(radians($3::float8)))"
        XCTAssertEqual(compiled.sql, "SELECT \(standardUserColumns) FROM (SELECT *, geo <-> \(centerCube) AS nearest_distance FROM users"
            + " WHERE (rperm && $1::text[]) IS TRUE AND geo IS NOT NULL AND data @> $2::jsonb ORDER BY nearest_distance LIMIT 100) AS nearest"
            + " WHERE nearest_distance <= $5::float8 * earth() ORDER BY nearest_distance LIMIT 100")
        // $5 is the chord of 1 km on the unit sphere, not the angle.
        XCTAssertEqual(compiled.parameters, [.textArray(["*"]), .json(#"{"location":{"__type":"GeoPoint"}}"#), .double(48.85), .double(2.35), .double(2 * sin(1 / 6371 / 2))])
        let everywhere = try compile(#"{"location":{"$nearSphere":\#(point),"$maxDistance":3.5}}"#)
        XCTAssertEqual(everywhere.parameters.last, .double(4), "from π radians on, a bound beyond any chord")

        let paged = try QueryCompiler.compileSelect(ParseQuery(className: "_User", where: ["location": ["$nearSphere": ["latitude": 1, "longitude": 2], "$maxDistance": 0.1]], limit: 20, skip: 40), layout: .users, readerIDs: nil)
        XCTAssertTrue(paged.sql.contains("LIMIT 60) AS nearest"), paged.sql)
        XCTAssertTrue(paged.sql.hasSuffix("LIMIT 20 OFFSET 40"), paged.sql)

        // With other conditions the box bounds the scan instead, in one level.
        let filtered = try compile(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":1},"age":{"$gt":18}}"#, readers: [])
        XCTAssertEqual(filtered.sql, "SELECT \(standardUserColumns) FROM users WHERE (rperm && $1::text[]) IS TRUE"
            + " AND (earth_box(\(center), $5::float8 * earth()) @> geo AND earth_distance(\(center), geo) <= $5::float8 * earth()"
            + " AND data @> $2::jsonb) AND (jsonb_typeof((data -> $6::text)) = 'number' AND (data -> $6::text) > $7::jsonb)"
            + " ORDER BY geo <-> \(center) LIMIT 100")
        let unbounded = try compile(#"{"location":{"$nearSphere":\#(point)}}"#)
        XCTAssertEqual(unbounded.sql, "SELECT \(standardUserColumns) FROM users WHERE (geo IS NOT NULL AND data @> $1::jsonb)"
            + " ORDER BY geo <-> ll_to_earth($2::float8, $3::float8) LIMIT 100")
        let count = try QueryCompiler.compileCount(ParseQuery(className: "_User", where: ["location": ["$nearSphere": ["latitude": 1, "longitude": 2], "$maxDistance": 0.1]]), layout: .users, readerIDs: nil)
        XCTAssertTrue(count.sql.contains("earth_box("), count.sql)
    }

    func testCountObjectsAndOwnerLayouts() throws {
        let query = ParseQuery(className: "Post", where: ["title": "x"], order: [.init(field: "title")], limit: 5, skip: 10, count: true)
        let count = try QueryCompiler.compileCount(query, layout: .objects(className: "Post"), readerIDs: ["u1", "*", "u1"])
        XCTAssertEqual(count.sql, "SELECT count(*) AS count FROM objects WHERE class_name = $1::text AND (rperm && $2::text[]) IS TRUE AND (data -> $3::text) @> $4::jsonb")
        XCTAssertEqual(count.parameters, [.text("Post"), .textArray(["*", "u1"]), .text("title"), .json("\"x\"")])

        let select = try QueryCompiler.compileSelect(query, layout: .objects(className: "Post"), readerIDs: nil)
        XCTAssertEqual(select.sql, "SELECT object_id, created_at, updated_at, acl, data FROM objects WHERE class_name = $1::text"
            + " AND (data -> $2::text) @> $3::jsonb ORDER BY (data -> $2::text) NULLS FIRST, object_id LIMIT 5 OFFSET 10")

        let sessions = try QueryCompiler.compileSelect(ParseQuery(className: "_Session"), layout: .sessions, readerIDs: ["u1"])
        XCTAssertEqual(sessions.sql, "SELECT object_id, created_at, updated_at, NULL::jsonb AS acl, '{}'::jsonb AS data, token, user_id,"
            + " created_with, installation_id, restricted, expires_at FROM sessions WHERE user_id = ANY($1::text[]) ORDER BY object_id LIMIT 100")
        XCTAssertEqual(sessions.parameters, [.textArray(["u1"])])
    }

    func testOrderKeysAndLimits() throws {
        let ordered = try compile("{}", order: "-createdAt,username,-objectId")
        XCTAssertEqual(ordered.sql, "SELECT \(standardUserColumns) FROM users ORDER BY created_at DESC, username, object_id DESC LIMIT 100")
        let custom = try compile("{}", order: "-score,a.b")
        XCTAssertTrue(custom.sql.hasSuffix("ORDER BY (data -> $1::text) DESC NULLS LAST, (data #> $2::text[]) NULLS FIRST, object_id LIMIT 100"), custom.sql)
        XCTAssertEqual(custom.parameters, [.text("score"), .textArray(["a", "b"])])

        let keys = try QueryCompiler.compileSelect(ParseQuery(className: "_User", keys: ["username", "age"]), layout: .users, readerIDs: nil)
        XCTAssertTrue(keys.sql.hasPrefix("SELECT object_id, created_at, updated_at, acl, COALESCE((SELECT jsonb_object_agg(e.key, e.value)"
            + " FROM jsonb_each(data) AS e WHERE e.key = ANY($1::text[])), '{}'::jsonb) AS data, username, email, email_verified FROM users"), keys.sql)
        XCTAssertEqual(keys.parameters, [.textArray(["age"])])
        let onlyColumns = try QueryCompiler.compileSelect(ParseQuery(className: "_User", keys: ["username"]), layout: .users, readerIDs: nil)
        XCTAssertTrue(onlyColumns.sql.contains("'{}'::jsonb AS data"), onlyColumns.sql)

        XCTAssertTrue(try QueryCompiler.compileSelect(ParseQuery(className: "_User", limit: 50_000), layout: .users, readerIDs: nil).sql.hasSuffix("LIMIT 1000"))
        XCTAssertThrowsError(try QueryCompiler.compileSelect(ParseQuery(className: "_User", limit: -1), layout: .users, readerIDs: nil))
        XCTAssertThrowsError(try QueryCompiler.compileSelect(ParseQuery(className: "_User", skip: 200_000), layout: .users, readerIDs: nil))
    }

    // MARK: - Operators

    func testEqualityShapes() throws {
        XCTAssertEqual(try predicate(#"{"age":30}"#).0, "(data -> $1::text) @> $2::jsonb")
        XCTAssertEqual(try predicate(#"{"age":null}"#).0, "((data -> $1::text) IS NULL OR (data -> $1::text) = 'null'::jsonb)")
        XCTAssertEqual(try predicate(#"{"tags":["a"]}"#).0, "(data -> $1::text) = $2::jsonb")
        let pointer = try predicate(#"{"owner":{"objectId":"u2","className":"_User","__type":"Pointer","extra":1}}"#)
        XCTAssertEqual(pointer.0, "((data -> $1::text) @> $2::jsonb OR (data -> $1::text) @> jsonb_build_array($2::jsonb))")
        XCTAssertEqual(pointer.1.last, .json(#"{"__type":"Pointer","className":"_User","objectId":"u2"}"#))
        let date = try predicate(#"{"when":{"__type":"Date","iso":"2024-01-02T03:04:05+02:00"}}"#)
        XCTAssertEqual(date.1.last, .json(#"{"__type":"Date","iso":"2024-01-02T01:04:05.000Z"}"#))
        XCTAssertEqual(try predicate(#"{"username":null}"#).0, "username IS NULL")
        XCTAssertEqual(try predicate(#"{"username":7}"#).0, "FALSE")
        XCTAssertEqual(try predicate(#"{"emailVerified":{"$eq":true}}"#).0, "email_verified = $1::boolean")
        XCTAssertEqual(try predicate(#"{"createdAt":"2024-01-01T00:00:00Z"}"#).1, [.timestamp(milliseconds: 1_704_067_200_000)])
        XCTAssertEqual(try predicate(#"{"username":{"$ne":"a"}}"#).0, "username IS DISTINCT FROM $1::text")
        XCTAssertEqual(try predicate(#"{"age":{"$ne":1}}"#).0, "NOT COALESCE((data -> $1::text) @> $2::jsonb, false)")
        let sessions = try compile(#"{"user":{"__type":"Pointer","className":"_User","objectId":"u9"}}"#, layout: .sessions)
        XCTAssertTrue(sessions.sql.contains("WHERE user_id = $1::text"), sessions.sql)
        XCTAssertEqual(sessions.parameters, [.text("u9")])
    }

    func testComparisonShapes() throws {
        XCTAssertEqual(try predicate(#"{"age":{"$gte":18}}"#).0, "(jsonb_typeof((data -> $1::text)) = 'number' AND (data -> $1::text) >= $2::jsonb)")
        XCTAssertEqual(try predicate(#"{"name":{"$lt":"m"}}"#).0, "(jsonb_typeof((data -> $1::text)) = 'string' AND (data -> $1::text) < $2::jsonb)")
        let date = try predicate(#"{"when":{"$gt":{"__type":"Date","iso":"2024-01-01T00:00:00Z"}}}"#)
        XCTAssertEqual(date.0, #"(((data -> $1::text) ->> '__type') = 'Date' AND ((data -> $1::text) ->> 'iso') > $2::text COLLATE "C")"#)
        XCTAssertEqual(date.1, [.text("when"), .text("2024-01-01T00:00:00.000Z")])
        XCTAssertEqual(try predicate(#"{"createdAt":{"$lte":{"__type":"Date","iso":"2024-01-01T00:00:00.5Z"}}}"#).1,
                       [.timestamp(milliseconds: 1_704_067_200_500)])
        XCTAssertEqual(try predicate(#"{"username":{"$gt":"m"}}"#).0, "username > $1::text")
    }

    func testListShapes() throws {
        let column = try predicate(#"{"username":{"$in":["a","b",null,3]}}"#)
        XCTAssertEqual(column.0, "(username = ANY($1::text[]) OR username IS NULL)")
        XCTAssertEqual(column.1, [.textArray(["a", "b"])])
        XCTAssertEqual(try predicate(#"{"objectId":{"$nin":["a"]}}"#).0, "NOT COALESCE(object_id = ANY($1::text[]), false)")
        XCTAssertEqual(try predicate(#"{"createdAt":{"$in":["2024-01-01T00:00:00Z"]}}"#).1, [.textArray(["2024-01-01T00:00:00.000Z"])])
        let custom = try predicate(#"{"tags":{"$in":["a",1]}}"#)
        XCTAssertEqual(custom.0, "EXISTS (SELECT 1 FROM jsonb_array_elements($2::jsonb) AS e(v) WHERE (data -> $1::text) @> e.v)")
        XCTAssertEqual(custom.1, [.text("tags"), .json(#"["a",1]"#)])
        XCTAssertEqual(try predicate(#"{"tags":{"$in":[]}}"#).0, "FALSE")
        XCTAssertEqual(try predicate(#"{"tags":{"$all":["a","b"]}}"#).0, "(data -> $1::text) @> $2::jsonb")
        XCTAssertEqual(try predicate(#"{"tags":{"$exists":true}}"#).0, "((data -> $1::text) IS NOT NULL AND (data -> $1::text) <> 'null'::jsonb)")
        XCTAssertEqual(try predicate(#"{"email":{"$exists":false}}"#).0, "email IS NULL")
    }

    func testRegexOptionsBecomeEmbeddedOptions() throws {
        XCTAssertEqual(try predicate(#"{"username":{"$regex":"^a"}}"#).0, "username ~ $1::text")
        XCTAssertEqual(try predicate(#"{"username":{"$regex":"^a"}}"#).1, [.text("(?p)^a")])
        XCTAssertEqual(try predicate(#"{"username":{"$regex":"^a","$options":"i"}}"#).1, [.text("(?pi)^a")])
        XCTAssertEqual(try predicate(#"{"username":{"$options":"mx","$regex":"^a"}}"#).1, [.text("(?nx)^a")])
        XCTAssertEqual(try predicate(#"{"username":{"$regex":"^a","$options":"ms"}}"#).1, [.text("(?w)^a")])
        XCTAssertEqual(try predicate(#"{"username":{"$regex":"^a","$options":"s"}}"#).1, [.text("(?s)^a")])
        XCTAssertEqual(try predicate(#"{"bio":{"$regex":"x"}}"#).0, "(jsonb_typeof((data -> $1::text)) = 'string' AND ((data -> $1::text) #>> '{}') ~ $2::text)")
    }

    func testRegexLiteralBlocksAreEscaped() {
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"^\Qa.b*(c)\E$"#), #"^a\.b\*\(c\)$"#)
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"\Qa b\E"#), #"a\ b"#, "spaces stay literal under the x option")
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"\Qx\\E"#), #"x\\"#, "a backslash inside a block is literal; \\E still ends it")
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"\Qé1\E\d+\Q?"#), #"é1\d+\?"#, "escapes outside blocks stay; an open block runs to the end")
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"a\\Qb"#), #"a\\Qb"#, "an escaped backslash before Q opens no block")
        XCTAssertEqual(RegexLiteralBlocks.rewrite(#"a\Eb"#), "ab", "a stray \\E is dropped, as in PCRE")
        XCTAssertEqual(RegexLiteralBlocks.rewrite("trailing\\"), "trailing\\")
    }

    func testOrAndShapes() throws {
        XCTAssertEqual(try predicate(#"{"$or":[{"a":1},{"b":2,"c":3}]}"#).0,
                       "((data -> $1::text) @> $2::jsonb OR ((data -> $3::text) @> $4::jsonb AND (data -> $5::text) @> $6::jsonb))")
        XCTAssertEqual(try predicate(#"{"$and":[{"a":1}],"a":{"$ne":2}}"#).0,
                       "(data -> $1::text) @> $2::jsonb AND NOT COALESCE((data -> $1::text) @> $3::jsonb, false)")
    }

    func testBoxAndCenterSphereShapes() throws {
        let box = try predicate(#"{"location":{"$within":{"$box":[{"__type":"GeoPoint","latitude":10,"longitude":170},{"__type":"GeoPoint","latitude":20,"longitude":-170}]}}}"#)
        XCTAssertEqual(box.0, "(geo <@ cube(ARRAY[$2::float8 * earth(), $4::float8 * earth(), $6::float8 * earth()],"
            + " ARRAY[$3::float8 * earth(), $5::float8 * earth(), $7::float8 * earth()]) AND latitude(geo) BETWEEN $8::float8 AND $9::float8"
            + " AND (longitude(geo) >= $10::float8 OR longitude(geo) <= $11::float8) AND data @> $1::jsonb)")
        let sphere = try predicate(#"{"location":{"$geoWithin":{"$centerSphere":[[2.35,48.85],0.01]}}}"#)
        XCTAssertEqual(sphere.1, [.json(#"{"location":{"__type":"GeoPoint"}}"#), .double(48.85), .double(2.35), .double(0.01)])
        XCTAssertFalse(sphere.0.contains("ORDER"))
    }

    func testBoundingCubeHoldsTheWholeRectangle() {
        for (south, west, north, east) in [(10.0, 170.0, 20.0, -170.0), (-10, -5, 10, 5), (40, 100, 60, 260 - 360), (-90, -180, 90, 180), (0, 0, 0, 0)] {
            let cube = GeoMath.boundingCube(south: south, west: west, north: north, east: east)
            let eastUnwrapped = west <= east ? east : east + 360
            for i in 0...20 {
                for j in 0...20 {
                    let latitude = (south + (north - south) * Double(i) / 20) * .pi / 180
                    let longitude = (west + (eastUnwrapped - west) * Double(j) / 20) * .pi / 180
                    let point = [cos(latitude) * cos(longitude), cos(latitude) * sin(longitude), sin(latitude)]
                    for axis in 0..<3 {
                        XCTAssertGreaterThanOrEqual(point[axis], cube.low[axis], "\(south) \(west) \(north) \(east)")
                        XCTAssertLessThanOrEqual(point[axis], cube.high[axis], "\(south) \(west) \(north) \(east)")
                    }
                }
            }
        }
        let small = GeoMath.boundingCube(south: 10, west: 20, north: 11, east: 21)
        XCTAssertLessThan(small.high[2] - small.low[2], 0.02, "a small rectangle gets a small cube")
    }

    // MARK: - Refusals

    func testUnsupportedOperatorsAreNamed() {
        for op in ["$inQuery", "$notInQuery", "$select", "$dontSelect", "$text", "$geoIntersects", "$elemMatch", "$not", "$size", "$type", "$mod"] {
            assertRefused(#"{"f":{"\#(op)":{}}}"#, mentioning: op)
        }
        assertRefused(#"{"f":{"$frob":1}}"#, mentioning: "unknown operator $frob on f")
        assertRefused(#"{"$relatedTo":{"object":{},"key":"k"}}"#, mentioning: "$relatedTo")
        assertRefused(#"{"$text":{"$search":{"$term":"x"}}}"#, mentioning: "$text")
        assertRefused(#"{"$where":"1"}"#, mentioning: "$where")
        assertRefused(#"{"location":{"$geoWithin":{"$polygon":[]}}}"#, mentioning: "$polygon")
        assertRefused(#"{"f":{"$gt":1,"plain":2}}"#, mentioning: "plain")
    }

    func testWrongOperandTypes() {
        assertRefused(#"{"age":{"$lt":{"a":1}}}"#, mentioning: "$lt on age expects a number, a string or a Date")
        assertRefused(#"{"age":{"$gt":true}}"#, mentioning: "$gt on age")
        assertRefused(#"{"age":{"$lt":{"__type":"Date","iso":"yesterday"}}}"#, mentioning: "invalid Date")
        assertRefused(#"{"createdAt":{"$lt":5}}"#, mentioning: "$lt on createdAt expects a Date")
        assertRefused(#"{"username":{"$lt":5}}"#, mentioning: "expects a string")
        assertRefused(#"{"emailVerified":{"$lt":true}}"#, mentioning: "not supported on emailVerified")
        assertRefused(#"{"age":{"$in":5}}"#, mentioning: "$in on age expects an array")
        assertRefused(#"{"age":{"$nin":{"a":1}}}"#, mentioning: "$nin on age expects an array")
        assertRefused(#"{"age":{"$in":[[1]]}}"#, mentioning: "$in on age accepts")
        assertRefused(#"{"username":{"$all":["a"]}}"#, mentioning: "$all on username needs an array field")
        assertRefused(#"{"age":{"$exists":1}}"#, mentioning: "$exists on age expects true or false")
        assertRefused(#"{"age":{"$regex":5}}"#, mentioning: "$regex on age expects a string")
        assertRefused(#"{"age":{"$regex":"a","$options":"g"}}"#, mentioning: "Bad $options value")
        assertRefused(#"{"age":{"$options":"i"}}"#, mentioning: "$options on age needs $regex")
        assertRefused(#"{"emailVerified":{"$regex":"a"}}"#, mentioning: "needs a string field")
        assertRefused(#"{"$or":{"a":1}}"#, mentioning: "$or expects a non-empty array")
        assertRefused(#"{"$or":[]}"#, mentioning: "$or expects a non-empty array")
        assertRefused(#"{"$and":[1]}"#, mentioning: "$and expects an array of where objects")
        assertRefused(#"{"owner":{"__type":"Pointer","className":"_User"}}"#, mentioning: "invalid Pointer")
    }

    func testGeoOperandsAreValidated() {
        let point = #"{"__type":"GeoPoint","latitude":1,"longitude":2}"#
        assertRefused(#"{"location":{"$nearSphere":\#(point),"$maxDistance":-1}}"#, mentioning: "$maxDistance on location must be a non-negative number")
        assertRefused(#"{"location":{"$nearSphere":\#(point),"$maxDistanceInKilometers":"5"}}"#, mentioning: "non-negative number")
        assertRefused(#"{"location":{"$nearSphere":\#(point),"$maxDistance":1,"$maxDistanceInMiles":1}}"#, mentioning: "one $maxDistance")
        assertRefused(#"{"location":{"$maxDistance":1}}"#, mentioning: "$maxDistance on location needs $nearSphere")
        assertRefused(#"{"location":{"$nearSphere":{"latitude":91,"longitude":0}}}"#, mentioning: "latitude must be between -90 and 90")
        assertRefused(#"{"location":{"$nearSphere":{"latitude":0,"longitude":-181}}}"#, mentioning: "longitude must be between")
        assertRefused(#"{"location":{"$nearSphere":[1,2]}}"#, mentioning: "expects a GeoPoint")
        assertRefused(#"{"location":{"$nearSphere":{"__type":"Pointer","latitude":1,"longitude":2}}}"#, mentioning: "expects a GeoPoint")
        assertRefused(#"{"$or":[{"location":{"$nearSphere":\#(point)}},{"a":1}]}"#, mentioning: "inside $or")
        assertRefused(#"{"location":{"$nearSphere":\#(point)},"$and":[{"location":{"$nearSphere":\#(point)}}]}"#, mentioning: "only one $nearSphere")
        assertRefused(#"{"location":{"$geoWithin":{"$centerSphere":[\#(point)]}}}"#, mentioning: "$centerSphere on location expects")
        assertRefused(#"{"location":{"$geoWithin":{"$centerSphere":[[1],0.1]}}}"#, mentioning: "[longitude, latitude]")
        assertRefused(#"{"location":{"$geoWithin":{"$centerSphere":[[1,2],-0.1]}}}"#, mentioning: "distance on location must be a non-negative number")
        assertRefused(#"{"location":{"$within":{"$box":[\#(point)]}}}"#, mentioning: "$box on location expects")
        assertRefused(#"{"location":{"$within":{"$box":[{"latitude":5,"longitude":0},{"latitude":4,"longitude":1}]}}}"#, mentioning: "north of")
        assertRefused(#"{"location":{"$within":{"$polygon":[]}}}"#, mentioning: "$within on location expects")
        assertRefused(#"{"username":{"$nearSphere":\#(point)}}"#, mentioning: "username is not one")
        assertRefused(#"{"a.b":{"$nearSphere":\#(point)}}"#, mentioning: "a.b is not one")
        assertRefused(#"{"location":{"$nearSphere":\#(point)}}"#, mentioning: "_Installation has no GeoPoint field", layout: .installations)
    }

    func testFieldNamesNeverReachTheSQL() {
        for field in ["a'b", "a\"b", "a;b", "a b", "_id", "1a", "a-b", "é", "a..b", ".a", String(repeating: "x", count: 129)] {
            let whereJSON = JSONValue.object([field: 1]).serialized()
            assertRefused(whereJSON, mentioning: "invalid field name")
        }
        assertRefused(#"{"ACL":{}}"#, mentioning: "ACL cannot be queried")
        assertRefused(#"{"password":"x"}"#, mentioning: "password cannot be queried")
        assertRefused(#"{"authData.facebook.id":"x"}"#, mentioning: "authData cannot be queried")
        assertRefused(#"{"username.first":"x"}"#, mentioning: "username has no subfields")
        assertRefused(#"{"email":"a@b"}"#, code: 119, mentioning: "not allowed to query email", readers: ["u1"])
        XCTAssertThrowsError(try QueryCompiler.compileSelect(ParseQuery(className: "_User", order: [.init(field: "x y")]), layout: .users, readerIDs: nil))
    }

    func testValuesNeverReachTheSQL() throws {
        let marker = "zq'; DROP TABLE users; --"
        let escaped = JSONValue.string(marker).serialized()
        let queries = [
            #"{"f":\#(escaped)}"#, #"{"f":{"$ne":\#(escaped)}}"#, #"{"f":{"$lt":\#(escaped)}}"#, #"{"f":{"$in":[\#(escaped)]}}"#,
            #"{"f":{"$all":[\#(escaped)]}}"#, #"{"f":{"$regex":\#(escaped)}}"#, #"{"username":\#(escaped)}"#,
            #"{"username":{"$in":[\#(escaped)]}}"#, #"{"f":{"__type":"Pointer","className":"X","objectId":\#(escaped)}}"#,
            #"{"f":{"a":\#(escaped)}}"#,
        ]
        for whereJSON in queries {
            let compiled = try compile(whereJSON, readers: [marker])
            XCTAssertFalse(compiled.sql.contains("zq"), compiled.sql)
            XCTAssertFalse(compiled.sql.contains("DROP"), compiled.sql)
        }
        let objects = try compile("{}", layout: .objects(className: marker))
        XCTAssertFalse(objects.sql.contains("DROP"), objects.sql)
    }

    func testNULInValuesIsRefused() {
        assertRefused(#"{"f":"a\u0000b"}"#, mentioning: "U+0000")
        assertRefused(#"{"f":{"$in":["\u0000"]}}"#, mentioning: "U+0000")
        assertRefused(#"{"f":{"$lt":"\u0000"}}"#, mentioning: "U+0000")
        assertRefused(#"{"f":{"$regex":"\u0000"}}"#, mentioning: "U+0000")
        assertRefused(#"{"username":"\u0000"}"#, mentioning: "U+0000")
    }

    func testSizeLimits() {
        let many = "{" + (0..<300).map { #""f\#($0)":1"# }.joined(separator: ",") + "}"
        assertRefused(many, mentioning: "more than 256 conditions")
        let longList = "[" + Array(repeating: "1", count: 1001).joined(separator: ",") + "]"
        assertRefused(#"{"f":{"$in":\#(longList)}}"#, mentioning: "more than 1000 values")
        var nested = #"{"a":1}"#
        for _ in 0..<9 { nested = #"{"$or":[\#(nested),{"b":1}]}"# }
        assertRefused(nested, mentioning: "nested deeper than 8")
        let longRegex = JSONValue.string(String(repeating: "a", count: 1025)).serialized()
        assertRefused(#"{"f":{"$regex":\#(longRegex)}}"#, mentioning: "longer than 1024 bytes")
    }

    func testDatabaseErrorMapping() {
        let invalidRegex = PostgresError.server(PostgresServerError(severity: "ERROR", sqlState: "2201B", message: "invalid regular expression: parentheses () not balanced"))
        XCTAssertEqual(QueryError(databaseError: invalidRegex), .invalidQuery("invalid $regex: invalid regular expression: parentheses () not balanced"))
        XCTAssertNil(QueryError(databaseError: .server(PostgresServerError(severity: "ERROR", sqlState: "23505", message: "dup"))))
        XCTAssertNil(QueryError(databaseError: .shutdown))
    }
}
