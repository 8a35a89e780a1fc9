import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

/// Each operator against real PostgreSQL (migrations 0001/0002), on a small seeded `users` table.
final class QueryPostgresTests: XCTestCase {
    private static let seeded: Result<QueryTestDatabase, Error> = Result { try seed() }

    private static func pointer(_ id: String, _ className: String = "_User") -> JSONValue {
        ["__type": "Pointer", "className": .string(className), "objectId": .string(id)]
    }

    private static func date(_ iso: String) -> JSONValue {
        ["__type": "Date", "iso": .string(iso)]
    }

    private static func geoPoint(_ latitude: Double, _ longitude: Double) -> JSONValue {
        ["__type": "GeoPoint", "latitude": .double(latitude), "longitude": .double(longitude)]
    }

    private static func seed() throws -> QueryTestDatabase {
        let db = try QueryTestDatabase(prefix: "query_ops")
        try db.insertUser("u1", username: "alice", email: "alice@example.com", data: [
            "age": 30, "name": "Alice", "tags": ["a", "b"], "score": 10.5, "when": date("2024-01-01T00:00:00.000Z"),
            "owner": pointer("u2"), "location": geoPoint(48.8566, 2.3522), "address": ["city": "Paris"],
        ], createdAt: "2024-01-01T00:00:01.000Z")
        try db.insertUser("u2", username: "bob", data: [
            "age": 25, "tags": ["b", "c"], "when": date("2024-06-01T12:00:00.000Z"), "nick": nil, "score": -2,
            "location": geoPoint(48.8606, 2.3376),
        ], createdAt: "2024-01-01T00:00:02.000Z")
        try db.insertUser("u3", username: "carol", data: [
            "age": "30", "tags": "a", "name": "carol\nsmith", "location": geoPoint(51.5074, -0.1278),
        ], createdAt: "2024-01-01T00:00:03.000Z")
        try db.insertUser("u4", username: "dave", data: [:], readers: ["u4"], createdAt: "2024-01-01T00:00:04.000Z")
        try db.insertUser("u5", username: "Eve", data: [
            "age": 40.0, "owners": [pointer("u1"), pointer("u2")], "score": 3, "location": geoPoint(-33.8688, 151.2093),
        ], createdAt: "2024-01-01T00:00:05.000Z")
        try db.insertObject("Post", "p1", data: ["title": "hello", "location": geoPoint(10, 179.5)])
        try db.insertObject("Post", "p2", data: ["title": "world", "location": geoPoint(10, -179.5)], readers: ["u1"])
        try db.insertObject("Post", "p3", data: ["title": "middle", "location": geoPoint(10, 0)])
        try db.insertObject("Other", "o1", data: ["title": "hello"])
        return db
    }

    private var db: QueryTestDatabase {
        get throws { try Self.seeded.get() }
    }

    /// Ids as a sorted set, for operators whose result order is not the point.
    private func set(_ whereJSON: String, readers: [String]? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        try db.ids(whereJSON, readers: readers).sorted()
    }

    func testEqualityOnColumnsAndCustomFields() throws {
        XCTAssertEqual(try set(#"{"username":"alice"}"#), ["u1"])
        XCTAssertEqual(try set(#"{"username":{"$eq":"bob"}}"#), ["u2"])
        XCTAssertEqual(try set(#"{"username":5}"#), [])
        XCTAssertEqual(try set(#"{"objectId":"u3"}"#), ["u3"])
        XCTAssertEqual(try set(#"{"age":30}"#), ["u1"], "the number 30, not the string \"30\"")
        XCTAssertEqual(try set(#"{"age":"30"}"#), ["u3"])
        XCTAssertEqual(try set(#"{"age":40}"#), ["u5"], "40 equals the stored 40.0")
        XCTAssertEqual(try set(#"{"score":10.5}"#), ["u1"])
        XCTAssertEqual(try set(#"{"address.city":"Paris"}"#), ["u1"])
        XCTAssertEqual(try set(#"{"address":{"city":"Paris"}}"#), ["u1"], "plain objects match exactly")
        XCTAssertEqual(try set(#"{"address":{}}"#), [])
        XCTAssertEqual(try set(#"{"username":"alice","age":25}"#), [])
    }

    func testArrayFieldsMatchAnElementOrTheWholeArray() throws {
        XCTAssertEqual(try set(#"{"tags":"a"}"#), ["u1", "u3"], "array holding \"a\", and the scalar \"a\"")
        XCTAssertEqual(try set(#"{"tags":["a","b"]}"#), ["u1"])
        XCTAssertEqual(try set(#"{"tags":["b","a"]}"#), [], "exact array match is ordered")
        XCTAssertEqual(try set(#"{"tags":{"$all":["a","b"]}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"tags":{"$all":["b"]}}"#), ["u1", "u2"])
        XCTAssertEqual(try set(#"{"tags":{"$all":[]}}"#), [])
        XCTAssertEqual(try set(#"{"tags":{"$in":["c","z"]}}"#), ["u2"])
        XCTAssertEqual(try set(#"{"tags":{"$nin":["a"]}}"#), ["u2", "u4", "u5"])
    }

    func testNullExistsAndNotEqual() throws {
        XCTAssertEqual(try set(#"{"nick":null}"#), ["u1", "u2", "u3", "u4", "u5"], "a stored null counts as missing")
        XCTAssertEqual(try set(#"{"age":null}"#), ["u4"])
        XCTAssertEqual(try set(#"{"age":{"$exists":false}}"#), ["u4"])
        XCTAssertEqual(try set(#"{"age":{"$exists":true}}"#), ["u1", "u2", "u3", "u5"])
        XCTAssertEqual(try set(#"{"nick":{"$exists":true}}"#), [])
        XCTAssertEqual(try set(#"{"email":{"$exists":true}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"age":{"$ne":30}}"#), ["u2", "u3", "u4", "u5"], "$ne matches missing fields too")
        XCTAssertEqual(try set(#"{"age":{"$ne":null}}"#), ["u1", "u2", "u3", "u5"])
        XCTAssertEqual(try set(#"{"username":{"$ne":"alice"}}"#), ["u2", "u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"email":{"$ne":"alice@example.com"}}"#), ["u2", "u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"tags":{"$ne":"b"}}"#), ["u3", "u4", "u5"], "$ne on an array excludes arrays holding the value")
    }

    func testComparisonsAreTypedByTheOperand() throws {
        XCTAssertEqual(try set(#"{"age":{"$gte":25,"$lt":40}}"#), ["u1", "u2"], "the string \"30\" is not a number")
        XCTAssertEqual(try set(#"{"age":{"$gt":29.5}}"#), ["u1", "u5"])
        XCTAssertEqual(try set(#"{"age":{"$lte":"30"}}"#), ["u3"], "a string operand compares strings only")
        XCTAssertEqual(try set(#"{"score":{"$lt":0}}"#), ["u2"])
        XCTAssertEqual(try set(#"{"username":{"$gt":"b","$lt":"d"}}"#), ["u2", "u3"])
        XCTAssertEqual(try set(#"{"when":{"$gt":{"__type":"Date","iso":"2024-03-01T00:00:00Z"}}}"#), ["u2"])
        XCTAssertEqual(try set(#"{"when":{"$lte":{"__type":"Date","iso":"2024-01-01T00:00:00.000Z"}}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"when":{"__type":"Date","iso":"2024-06-01T12:00:00Z"}}"#), ["u2"], "ISO text is canonicalised")
        XCTAssertEqual(try set(#"{"createdAt":{"$gt":{"__type":"Date","iso":"2024-01-01T00:00:03.000Z"}}}"#), ["u4", "u5"])
        XCTAssertEqual(try set(#"{"createdAt":{"$lt":"2024-01-01T00:00:02.000Z"}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"createdAt":{"__type":"Date","iso":"2024-01-01T00:00:02Z"}}"#), ["u2"])
        XCTAssertEqual(try set(#"{"updatedAt":{"$gte":{"__type":"Date","iso":"2024-01-01T00:00:05.000Z"}}}"#), ["u5"])
    }

    func testPointers() throws {
        XCTAssertEqual(try set(#"{"owner":{"__type":"Pointer","className":"_User","objectId":"u2"}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"owner":{"__type":"Pointer","className":"Other","objectId":"u2"}}"#), [])
        XCTAssertEqual(try set(#"{"owners":{"__type":"Pointer","className":"_User","objectId":"u1"}}"#), ["u5"],
                       "an array of Pointers holding the Pointer")
        XCTAssertEqual(try set(#"{"owner":{"$in":[{"__type":"Pointer","className":"_User","objectId":"u2"},{"__type":"Pointer","className":"_User","objectId":"zz"}]}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"owners":{"$all":[{"__type":"Pointer","className":"_User","objectId":"u2"},{"__type":"Pointer","className":"_User","objectId":"u1"}]}}"#), ["u5"])
        XCTAssertEqual(try set(#"{"owner":{"$ne":{"__type":"Pointer","className":"_User","objectId":"u2"}}}"#), ["u2", "u3", "u4", "u5"])
    }

    func testInAndNotIn() throws {
        XCTAssertEqual(try set(#"{"age":{"$in":[25,40]}}"#), ["u2", "u5"])
        XCTAssertEqual(try set(#"{"age":{"$in":[null,25]}}"#), ["u2", "u4"])
        XCTAssertEqual(try set(#"{"age":{"$in":[]}}"#), [])
        XCTAssertEqual(try set(#"{"age":{"$nin":[25,30]}}"#), ["u3", "u4", "u5"], "$nin matches missing fields")
        XCTAssertEqual(try set(#"{"age":{"$nin":[]}}"#), ["u1", "u2", "u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"username":{"$in":["alice","Eve","nobody",7]}}"#), ["u1", "u5"])
        XCTAssertEqual(try set(#"{"objectId":{"$nin":["u1","u2"]}}"#), ["u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"emailVerified":{"$in":[true,null]}}"#), ["u1", "u2", "u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"createdAt":{"$in":[{"__type":"Date","iso":"2024-01-01T00:00:02Z"},"2024-01-01T00:00:05.000Z"]}}"#), ["u2", "u5"])
    }

    func testRegexAndOptions() throws {
        XCTAssertEqual(try set(#"{"username":{"$regex":"^a"}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"username":{"$regex":"^e"}}"#), [])
        XCTAssertEqual(try set(#"{"username":{"$regex":"^e","$options":"i"}}"#), ["u5"])
        XCTAssertEqual(try set(#"{"name":{"$regex":"^smith"}}"#), [])
        XCTAssertEqual(try set(#"{"name":{"$regex":"^smith$","$options":"m"}}"#), ["u3"])
        XCTAssertEqual(try set(#"{"name":{"$regex":"carol.smith"}}"#), [], "`.` stops at a newline without s")
        XCTAssertEqual(try set(#"{"name":{"$regex":"carol.smith","$options":"s"}}"#), ["u3"])
        XCTAssertEqual(try set(#"{"name":{"$regex":"a l i","$options":"xi"}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"age":{"$regex":"3"}}"#), ["u3"], "only string values match a regex")
        XCTAssertThrowsError(try db.ids(#"{"username":{"$regex":"(unclosed"}}"#)) { error in
            guard let postgresError = error as? PostgresError else { return XCTFail("\(error)") }
            XCTAssertEqual(QueryError(databaseError: postgresError)?.code, 102)
        }
    }

    /// The SDKs' `contains`/`startsWith`/`endsWith`: `\Q…\E` blocks match their text literally.
    func testRegexLiteralBlocks() throws {
        XCTAssertEqual(try set(#"{"username":{"$regex":"^\\Qali\\E"}}"#), ["u1"], "startsWith")
        XCTAssertEqual(try set(#"{"username":{"$regex":"\\Qol\\E$"}}"#), ["u3"], "endsWith")
        XCTAssertEqual(try set(#"{"email":{"$regex":"\\Qe@example.c\\E"}}"#), ["u1"], "contains")
        XCTAssertEqual(try set(#"{"username":{"$regex":"\\Q.*\\E"}}"#), [], "metacharacters in a block are literal")
        XCTAssertEqual(try set(#"{"username":{"$regex":"\\Q(\\E"}}"#), [], "an unbalanced parenthesis in a block is no syntax error")
        XCTAssertEqual(try set(#"{"username":{"$regex":"^\\QEVE\\E$","$options":"i"}}"#), ["u5"])
        XCTAssertEqual(try set(#"{"name":{"$regex":"\\Qcarol\nsmith"}}"#), ["u3"], "a block without \\E runs to the end")
    }

    func testOrAnd() throws {
        XCTAssertEqual(try set(#"{"$or":[{"username":"alice"},{"age":25}]}"#), ["u1", "u2"])
        XCTAssertEqual(try set(#"{"$and":[{"age":{"$gt":20}},{"age":{"$lt":35}}]}"#), ["u1", "u2"])
        XCTAssertEqual(try set(#"{"$or":[{"$and":[{"tags":"a"},{"age":"30"}]},{"username":"Eve"}],"age":{"$exists":true}}"#), ["u3", "u5"])
    }

    func testNorAndContainedBy() throws {
        XCTAssertEqual(try set(#"{"$nor":[{"username":"alice"},{"age":25}]}"#), ["u3", "u4", "u5"])
        XCTAssertEqual(try set(#"{"$nor":[{"age":{"$gt":26}}]}"#), ["u2", "u3", "u4"], "a missing or string age is not > 26: kept, as MongoDB")
        XCTAssertEqual(try set(#"{"$nor":[{"$or":[{"tags":"a"},{"tags":"c"}]}],"age":{"$exists":true}}"#), ["u5"])
        XCTAssertEqual(try set(#"{"tags":{"$containedBy":["a","b","c"]}}"#), ["u1", "u2"], "arrays only: carol's scalar \"a\" is not")
        XCTAssertEqual(try set(#"{"tags":{"$containedBy":["a","b"]}}"#), ["u1"])
        XCTAssertEqual(try set(#"{"tags":{"$containedBy":[]}}"#), [])
        XCTAssertEqual(try set(#"{"owners":{"$containedBy":[{"__type":"Pointer","className":"_User","objectId":"u1"},{"__type":"Pointer","className":"_User","objectId":"u2"}]}}"#), ["u5"])
        for refused in [#"{"$nor":[]}"#, #"{"$nor":{"a":1}}"#, #"{"tags":{"$containedBy":"a"}}"#, #"{"username":{"$containedBy":["a"]}}"#] {
            XCTAssertThrowsError(try set(refused), refused)
        }
    }

    func testOrderLimitSkipKeysAndCount() throws {
        let db = try db
        XCTAssertEqual(try db.ids("{}"), ["u1", "u2", "u3", "u4", "u5"], "object_id breaks ties")
        XCTAssertEqual(try db.ids("{}", order: "-createdAt"), ["u5", "u4", "u3", "u2", "u1"])
        XCTAssertEqual(try db.ids("{}", order: "-score,username"), ["u1", "u5", "u2", "u3", "u4"],
                       "numbers by value; a missing field sorts last when descending")
        XCTAssertEqual(try db.ids(#"{"age":{"$exists":true}}"#, order: "-age,objectId"), ["u5", "u1", "u2", "u3"],
                       "jsonb sorts strings below numbers")
        XCTAssertEqual(try db.ids("{}", order: "createdAt", limit: "2", skip: "1"), ["u2", "u3"])
        XCTAssertEqual(try db.ids("{}", limit: "0"), [])
        XCTAssertEqual(try db.count("{}"), 5)
        XCTAssertEqual(try db.count("{}", readers: []), 4)
        XCTAssertEqual(try db.count(#"{"age":{"$gt":20}}"#), 3)

        let query = try ParseQuery.fromRequest(className: "_User", parameters: [("where", #"{"username":"alice"}"#), ("keys", "name,username,nothing")])
        let row = try XCTUnwrap(db.rows(query).first)
        XCTAssertEqual(try JSONParser().parse(XCTUnwrap(row["data"].json)), ["name": "Alice"])
        XCTAssertEqual(row["username"].string, "alice")
        XCTAssertEqual(row["created_at"].timestampMilliseconds, 1_704_067_201_000)
        XCTAssertTrue(query.returns("username"))
        XCTAssertFalse(query.returns("email"))
        XCTAssertTrue(query.returns("createdAt"))

        let all = try XCTUnwrap(db.rows(ParseQuery(className: "_User", where: ["username": "bob"])).first)
        XCTAssertEqual(try JSONParser().parse(XCTUnwrap(all["data"].json))["tags"], ["b", "c"])
        XCTAssertEqual(all.count, 8, "object_id, created_at, updated_at, acl, data, username, email, email_verified")
    }

    func testReadAccessAndProtectedFields() throws {
        let db = try db
        XCTAssertEqual(try db.ids("{}", readers: []), ["u1", "u2", "u3", "u5"])
        XCTAssertEqual(try db.ids("{}", readers: ["u4"]), ["u1", "u2", "u3", "u4", "u5"])
        XCTAssertEqual(try db.ids(#"{"username":"dave"}"#, readers: ["*"]), [])
        XCTAssertThrowsError(try db.ids(#"{"email":"alice@example.com"}"#, readers: ["u1"])) { error in
            XCTAssertEqual((error as? QueryError)?.code, 119)
        }
        XCTAssertThrowsError(try db.ids("{}", order: "email", readers: [])) { error in
            XCTAssertEqual((error as? QueryError)?.code, 119)
        }
        XCTAssertEqual(try db.ids(#"{"email":"alice@example.com"}"#), ["u1"], "the master key may query email")
        XCTAssertThrowsError(try db.ids(#"{"password":"x"}"#)) { error in
            XCTAssertEqual(error as? QueryError, .invalidQuery("password cannot be queried on _User"))
        }
    }

    func testObjectsTableIsFilteredByClassAndACL() throws {
        let db = try db
        let posts = TableLayout.objects(className: "Post")
        XCTAssertEqual(try db.ids(#"{"title":"hello"}"#, layout: posts), ["p1"])
        XCTAssertEqual(try db.ids(#"{"title":"hello"}"#, layout: .objects(className: "Other")), ["o1"])
        XCTAssertEqual(try db.ids("{}", layout: posts, readers: []), ["p1", "p3"])
        XCTAssertEqual(try db.ids("{}", layout: posts, readers: ["u1"]), ["p1", "p2", "p3"])
        XCTAssertEqual(try db.count("{}", layout: posts, readers: ["u1"]), 3)
    }

    func testSessionsAreVisibleToTheirOwnerOnly() throws {
        let db = try db
        for (id, user) in [("s1", "u1"), ("s2", "u1"), ("s3", "u2")] {
            try db.connection.query("""
                INSERT INTO sessions (object_id, token, user_id, expires_at) VALUES ($1, $2, $3, now() + interval '1 day')
                ON CONFLICT DO NOTHING
                """, [.text(id), .text("r:" + id), .text(user)])
        }
        XCTAssertEqual(try db.ids("{}", layout: .sessions, readers: ["u1"]), ["s1", "s2"])
        XCTAssertEqual(try db.ids("{}", layout: .sessions, readers: []), [])
        XCTAssertEqual(try db.ids(#"{"user":{"__type":"Pointer","className":"_User","objectId":"u2"}}"#, layout: .sessions), ["s3"])
        XCTAssertEqual(try db.ids(#"{"sessionToken":"r:s2"}"#, layout: .sessions, readers: ["u1"]), ["s2"])
        XCTAssertEqual(try db.ids(#"{"expiresAt":{"$gt":{"__type":"Date","iso":"2000-01-01T00:00:00Z"}}}"#, layout: .sessions, readers: ["u2"]), ["s3"])
        XCTAssertThrowsError(try db.ids(#"{"custom":1}"#, layout: .sessions)) { error in
            XCTAssertEqual((error as? QueryError)?.code, 102)
        }
    }

    func testGeoOperators() throws {
        let db = try db
        let paris = #"{"__type":"GeoPoint","latitude":48.8584,"longitude":2.2945}"#
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris)}}"#), ["u2", "u1", "u3", "u5"], "nearest first, no radius")
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris),"$maxDistanceInKilometers":5}}"#), ["u2", "u1"])
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris),"$maxDistanceInMiles":250}}"#), ["u2", "u1", "u3"])
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris),"$maxDistanceInRadians":0.00055}}"#), ["u2"])
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris),"$maxDistance":0.00055}}"#), ["u2"])
        XCTAssertEqual(try db.ids(#"{"location":{"$nearSphere":\#(paris),"$maxDistanceInKilometers":5}}"#, order: "username"), ["u1", "u2"],
                       "an explicit order replaces distance order")
        XCTAssertEqual(try db.ids(#"{"location":{"$geoWithin":{"$centerSphere":[[2.2945,48.8584],0.0008]}}}"#), ["u1", "u2"])
        XCTAssertEqual(try db.ids(#"{"location":{"$geoWithin":{"$centerSphere":[\#(paris),1.5]}}}"#), ["u1", "u2", "u3"])
        XCTAssertEqual(try db.ids(#"{"nick":{"$nearSphere":\#(paris)}}"#), [], "only the class's GeoPoint field matches")
        XCTAssertEqual(try db.count(#"{"location":{"$nearSphere":\#(paris),"$maxDistanceInKilometers":5}}"#), 2)
        let withKeys = try ParseQuery.fromRequest(className: "_User", parameters: [
            ("where", #"{"location":{"$nearSphere":\#(paris),"$maxDistanceInKilometers":5}}"#), ("keys", "age"), ("skip", "1"),
        ])
        let rows = try db.rows(withKeys, readers: [])
        XCTAssertEqual(rows.map { $0["object_id"].string }, ["u1"], "the second nearest, through the nearest-first form")
        XCTAssertEqual(try JSONParser().parse(XCTUnwrap(rows.first?["data"].json)), ["age": 30])

        let box = #"{"location":{"$within":{"$box":[{"__type":"GeoPoint","latitude":48,"longitude":2},{"__type":"GeoPoint","latitude":52,"longitude":3}]}}}"#
        XCTAssertEqual(try db.ids(box), ["u1", "u2"])
        let wide = #"{"location":{"$geoWithin":{"$box":[{"__type":"GeoPoint","latitude":-40,"longitude":-1},{"__type":"GeoPoint","latitude":52,"longitude":152}]}}}"#
        XCTAssertEqual(try db.ids(wide), ["u1", "u2", "u3", "u5"])
        let posts = TableLayout.objects(className: "Post")
        let antimeridian = #"{"location":{"$within":{"$box":[{"__type":"GeoPoint","latitude":0,"longitude":179},{"__type":"GeoPoint","latitude":20,"longitude":-179}]}}}"#
        XCTAssertEqual(try db.ids(antimeridian, layout: posts), ["p1", "p2"], "a box crossing the antimeridian")
        let aroundZero = #"{"location":{"$within":{"$box":[{"__type":"GeoPoint","latitude":0,"longitude":-1},{"__type":"GeoPoint","latitude":20,"longitude":1}]}}}"#
        XCTAssertEqual(try db.ids(aroundZero, layout: posts), ["p3"])
    }

    func testGeoQueriesUseTheGistIndex() throws {
        let query = try ParseQuery.fromRequest(className: "_User", parameters: [
            ("where", #"{"location":{"$nearSphere":{"__type":"GeoPoint","latitude":48.85,"longitude":2.35},"$maxDistanceInKilometers":1}}"#),
        ])
        let compiled = try QueryCompiler.compileSelect(query, layout: .users, readerIDs: nil)
        // Its own database of 5,000 users spread over the globe, analysed, so the planner's own
        // choice (not a forced one) is what is checked.
        let many = try QueryTestDatabase(prefix: "query_geo_index")
        try many.connection.execute("""
            INSERT INTO users (object_id, username, data, rperm, wperm, created_at, updated_at, geo)
            SELECT 'g' || n, 'user' || n, jsonb_build_object('location', jsonb_build_object('__type', 'GeoPoint',
                   'latitude', (n % 170) - 85, 'longitude', (n * 7 % 360) - 180)), '{*}', ARRAY['g' || n], now(), now(),
                   ll_to_earth((n % 170) - 85, (n * 7 % 360) - 180)
            FROM generate_series(1, 5000) AS n
            """)
        try many.connection.execute("ANALYZE users")
        let plan = try many.connection.query("EXPLAIN " + compiled.sql, compiled.parameters).compactMap { $0[0].string }.joined(separator: "\n")
        XCTAssertTrue(plan.contains("users_geo"), plan)
    }

    func testInjectionAttemptsStayParameters() throws {
        let db = try db
        XCTAssertEqual(try set(#"{"username":"alice' OR '1'='1"}"#), [])
        XCTAssertEqual(try set(#"{"name":{"$regex":"'; DROP TABLE users; --"}}"#), [])
        XCTAssertEqual(try set(#"{"tags":{"$in":["a'); DROP TABLE users; --"]}}"#), [])
        for field in ["a'; DROP TABLE users; --", "x->>'y'", "a b", "_rperm", "a..b", "1a", "$where"] {
            let whereJSON = JSONValue.object([field: 1]).serialized()
            XCTAssertThrowsError(try db.ids(whereJSON), field) { error in
                XCTAssertEqual((error as? QueryError)?.code, 102, field)
            }
        }
        XCTAssertEqual(try db.count("{}"), 5, "the users table is intact")
    }
}
