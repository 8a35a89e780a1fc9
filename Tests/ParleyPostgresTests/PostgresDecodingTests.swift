import ParleyLog
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

final class PostgresDecodingTests: XCTestCase {
    func testTypedRoundTrips() async throws {
        let test = try await TestClient(prefix: "types")
        let client = test.client
        try await client.query("""
            CREATE TABLE samples (
                id bigint PRIMARY KEY, label text, score double precision, flag boolean,
                payload bytea, doc jsonb, happened timestamptz, tags text[], nums int8[]
            )
            """, prepared: false)
        let allBytes = (0...255).map { UInt8($0) }
        let label = "héllo \"wörld\" 'quotes' \\ 👋 漢字"
        let when: Int64 = 1_764_484_136_123
        try await client.query(
            "INSERT INTO samples VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            [.int(1), .text(label), .double(-12.5e-3), .bool(true), .bytea(allBytes), .json("{\"k\": [1, \"ü\", null]}"),
             .timestamp(milliseconds: when), .textArray(["a", "b,c", "d\"e", "", "NULL"]), .intArray([1, -2, Int.max])])
        try await client.query("INSERT INTO samples (id) VALUES ($1)", [.int(2)])
        try await client.query("INSERT INTO samples (id, label) VALUES ($1, $2)", [.int(3), .null])

        let rows = try await client.query("SELECT * FROM samples ORDER BY id")
        XCTAssertEqual(rows.count, 3)
        let full = rows[0]
        XCTAssertEqual(full["id"].int, 1)
        XCTAssertEqual(full["label"].string, label)
        XCTAssertEqual(full["score"].double, -12.5e-3)
        XCTAssertEqual(full["flag"].bool, true)
        XCTAssertEqual(full["payload"].bytes, allBytes)
        XCTAssertEqual(full["doc"].json, "{\"k\": [1, \"ü\", null]}")
        XCTAssertEqual(full["happened"].timestampMilliseconds, when)
        XCTAssertEqual(full["tags"].string, "{a,\"b,c\",\"d\\\"e\",\"\",\"NULL\"}")
        XCTAssertEqual(full["nums"].string, "{1,-2,\(Int.max)}")
        XCTAssertEqual(full["happened"].typeOID, PostgresTypeOID.timestamptz)
        XCTAssertEqual(full[0].int, 1)
        XCTAssertEqual(full.count, 9)

        for row in rows.dropFirst() {
            XCTAssertTrue(row["label"].isNull)
            XCTAssertNil(row["score"].double)
            XCTAssertNil(row["flag"].bool)
            XCTAssertNil(row["payload"].bytes)
            XCTAssertNil(row["doc"].json)
            XCTAssertNil(row["happened"].timestampMilliseconds)
        }
        XCTAssertTrue(rows[0]["no_such_column"].isNull)
        XCTAssertFalse(rows[0].contains("no_such_column"))

        // Values computed by the server decode too.
        let computed = try await client.query("""
            SELECT 'NaN'::float8 AS nan, '-Infinity'::float8 AS neg, 9223372036854775807::int8 AS big, false AS f,
                   '2024-02-29 23:59:59.999+05:30'::timestamptz AS ts, '1969-12-31'::date AS d, NULL::text AS n,
                   $1::int8 = ANY($2::int8[]) AS member
            """, [.int(3), .intArray([1, 2, 3])])
        let row = computed[0]
        XCTAssertTrue(row["nan"].double!.isNaN)
        XCTAssertEqual(row["neg"].double, -.infinity)
        XCTAssertEqual(row["big"].int, Int.max)
        XCTAssertEqual(row["f"].bool, false)
        XCTAssertEqual(row["ts"].timestampMilliseconds, 1_709_231_399_999)
        XCTAssertEqual(row["d"].timestampMilliseconds, -86_400_000)
        XCTAssertNil(row["n"].string)
        XCTAssertEqual(row["member"].bool, true)

        let affected = try await client.query("UPDATE samples SET flag = $1 WHERE id > $2", [.bool(false), .int(1)])
        XCTAssertEqual(affected.affectedRows, 2)
        XCTAssertEqual(affected.commandTag, "UPDATE 2")
        await test.shutdown()
    }

    /// Cells are read from libpq's result in place: rows stay readable after later statements
    /// on the same connection and from another thread, `withBytes` tells NULL from the empty
    /// string, and cells compare by type and text.
    func testRowsKeepTheirResultAlive() async throws {
        let test = try await TestClient(prefix: "rowsalive") { $0.connectionsPerLoop = 1 }
        let client = test.client
        let first = try await client.query("SELECT g AS n, repeat('x', g) AS s, NULL::text AS z, ''::text AS e FROM generate_series(1, 50) g")
        for _ in 0..<20 { _ = try await client.query("SELECT repeat('y', 1000) AS s") }
        let sums = await Task.detached { first.reduce(0) { $0 + ($1["s"].string?.count ?? -1000) } }.value
        XCTAssertEqual(sums, (1...50).reduce(0, +))
        let row = first[49]
        XCTAssertEqual(row["n"].int, 50)
        XCTAssertEqual(row["s"].withBytes { $0.map { Array($0) } }, Array(repeating: UInt8(ascii: "x"), count: 50))
        XCTAssertTrue(row["z"].withBytes { $0 == nil })
        XCTAssertTrue(row["z"].isNull)
        XCTAssertEqual(row["e"].withBytes { $0?.count }, 0)
        XCTAssertFalse(row["e"].isNull)
        XCTAssertEqual(row["e"].string, "")
        XCTAssertEqual(first[3]["n"], first[3]["n"])
        XCTAssertNotEqual(first[3]["n"], first[4]["n"])
        XCTAssertTrue(row["missing"].isNull, "an unknown column reads as NULL")
        XCTAssertTrue(row["missing"].withBytes { $0 == nil })
        await test.shutdown()
    }

    func testParameterWithNULByteIsRejectedClearly() async throws {
        let test = try await TestClient(prefix: "nul")
        do {
            try await test.client.query("SELECT $1::text", [.text("a\u{0}b")])
            XCTFail("expected an error")
        } catch {
            guard case .nulInText(let what) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(what, "parameter $1")
            XCTAssertTrue(error.isNULInText)
        }
        // jsonb's `\u0000` is refused by the server (22P05): the same rule for callers.
        do {
            try await test.client.query("SELECT $1::jsonb", [.json(#"{"a":"\u0000"}"#)])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error.sqlState, "22P05", "\(error)")
            XCTAssertTrue(error.isNULInText)
        }
        do {
            try await test.client.query("SELECT $1::jsonb", [.json(#"{"a":"\\u0000"}"#)])
        } catch {
            XCTFail("an escaped backslash is not NUL: \(error)")
        }
        await test.shutdown()
    }

    func testTextCodecs() {
        XCTAssertEqual(PostgresText.parseTimestamp("2026-11-30 06:48:56.123456+00"), 1_796_021_336_123)
        XCTAssertEqual(PostgresText.parseTimestamp("1970-01-01 00:00:00"), 0)
        XCTAssertEqual(PostgresText.parseTimestamp("1970-01-01T01:00:00+01"), 0)
        XCTAssertEqual(PostgresText.parseTimestamp("1970-01-01 00:00:00.5-00:30"), 1_800_500)
        XCTAssertNil(PostgresText.parseTimestamp("infinity"))
        XCTAssertNil(PostgresText.parseTimestamp("2024-01-01 00:00:00 BC"))
        XCTAssertEqual(PostgresText.parseTimestamp("2026-11-30T06:48:56.123Z"), 1_796_021_336_123)
        XCTAssertEqual(PostgresText.parseTimestamp("2026-11-30"), 1_795_996_800_000)
        XCTAssertEqual(PostgresText.parseTimestamp("1970-01-01 00:00:00+05:30:15"), -19_815_000)
        XCTAssertNil(PostgresText.parseTimestamp("2026-11-30 06:48:56."))
        XCTAssertNil(PostgresText.parseTimestamp("2026-13-30 06:48:56"))
        XCTAssertNil(PostgresText.parseTimestamp("2026-11-30 06:48"))
        XCTAssertNil(PostgresText.parseTimestamp("2026-11-30 06:48:56+1"))
        XCTAssertNil(PostgresText.parseTimestamp("2026-11-30 06:48:56Zx"))
        XCTAssertNil(PostgresText.parseTimestamp(""))
        XCTAssertEqual(UTCTime.iso8601(milliseconds: 1_796_021_336_123), "2026-11-30T06:48:56.123Z")
        XCTAssertEqual(UTCTime.iso8601(milliseconds: 0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(UTCTime.iso8601(milliseconds: -1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(UTCTime.iso8601(milliseconds: 253_402_300_799_999), "9999-12-31T23:59:59.999Z")
        XCTAssertEqual(UTCTime.iso8601(milliseconds: 253_402_300_800_000), "10000-01-01T00:00:00.000Z")
        XCTAssertEqual(PostgresText.hexBytea([0, 0xff, 0x10]), "\\x00ff10")
        XCTAssertEqual(PostgresText.decodeBytea("\\x00FF10"), [0, 0xff, 0x10])
        XCTAssertNil(PostgresText.decodeBytea("\\x0"))
        XCTAssertEqual(PostgresText.arrayLiteral(["a\\b", "c\"d"]), "{\"a\\\\b\",\"c\\\"d\"}")
    }

    /// PostgreSQL's UTC text is rewritten digit for digit into what parsing and printing the
    /// instant gives; every other shape is refused (and parsed by the caller).
    func testPostgresUTCTextIsRewrittenAsItsInstant() {
        func rewritten(_ text: String) -> String? {
            var bytes: [UInt8] = []
            var text = text
            return text.withUTF8 { utf8 in
                guard UTCTime.isPostgresUTC(utf8) else { return nil }
                UTCTime.appendISO8601(postgresUTC: utf8, to: &bytes)
                return String(decoding: bytes, as: UTF8.self)
            }
        }
        for text in ["2026-11-30 06:48:56.123456+00", "2026-11-30 06:48:56+00", "2026-11-30 06:48:56.1+00",
                     "2026-11-30 06:48:56.12+00", "2026-11-30 06:48:56.999999+00", "1969-12-31 23:59:59.999+00",
                     "0001-01-01 00:00:00+00", "9999-12-31 23:59:59.5+00", "2024-02-29 00:00:00+00"] {
            XCTAssertEqual(rewritten(text), PostgresText.parseTimestamp(text).map(UTCTime.iso8601(milliseconds:)), text)
        }
        XCTAssertEqual(rewritten("2026-11-30 06:48:56.1+00"), "2026-11-30T06:48:56.100Z")
        for text in ["2026-11-30 06:48:56+01", "2026-11-30 06:48:56+00 BC", "12026-11-30 06:48:56+00", "infinity",
                     "2026-11-30 06:48:56.+00", "2026-11-30 06:48:56.1234567+00", "2023-02-29 00:00:00+00",
                     "2026-13-30 06:48:56+00", "2026-11-30 24:00:00+00", "2026-11-30 06:60:56+00", "2026-11-30T06:48:56+00",
                     "2026-11-30 06:48:56", "2026-11-3x 06:48:56+00", ""] {
            XCTAssertNil(rewritten(text), text)
        }
    }
}
