import Foundation
import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import ParleyTestSupport

/// A fresh database on the shared test cluster with the package's migrations applied, and
/// helpers to run compiled queries against it. XCTest runs the tests of a process one at a time,
/// so the blocking connection is only ever used by one thread at a time.
final class QueryTestDatabase: @unchecked Sendable {
    let connection: PostgresBlockingConnection

    init(prefix: String) throws {
        let postgres = try TestPostgres.shared()
        let url = try postgres.makeDatabase(prefix: prefix)
        try Migrator(connectionString: url, directory: Self.migrationsDirectory).migrate()
        connection = try PostgresBlockingConnection(connectionString: url)
    }

    /// `<package>/migrations`, found from this file's path.
    static var migrationsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("migrations").path
    }

    /// Inserts a user; `location` is mirrored into `geo` as the accounts code does.
    func insertUser(_ id: String, username: String, email: String? = nil, data: JSONValue = [:], readers: [String] = ["*"],
                    createdAt: String = "2024-01-01T00:00:00.000Z") throws {
        try connection.query("""
            INSERT INTO users (object_id, username, email, data, rperm, wperm, created_at, updated_at)
            VALUES ($1, $2, $3, $4::jsonb, $5::text[], $6::text[], $7::timestamptz, $7::timestamptz)
            """, [.text(id), .text(username), email.map { .text($0) } ?? .null, .json(data.serialized()), .textArray(readers),
                  .textArray([id]), .text(createdAt)])
        try mirrorGeo(table: "users", id: id, data: data)
    }

    /// Inserts a row of a generic class.
    func insertObject(_ className: String, _ id: String, data: JSONValue = [:], readers: [String] = ["*"]) throws {
        try connection.query("""
            INSERT INTO objects (class_name, object_id, data, rperm) VALUES ($1, $2, $3::jsonb, $4::text[])
            """, [.text(className), .text(id), .json(data.serialized()), .textArray(readers)])
        try mirrorGeo(table: "objects", id: id, data: data)
    }

    private func mirrorGeo(table: String, id: String, data: JSONValue) throws {
        guard let point = data["location"], let latitude = point["latitude"]?.double, let longitude = point["longitude"]?.double else { return }
        try connection.query("UPDATE \(table) SET geo = ll_to_earth($1::float8, $2::float8) WHERE object_id = $3::text",
                             [.double(latitude), .double(longitude), .text(id)])
    }

    /// Runs the compiled SELECT and returns the rows.
    func rows(_ query: ParseQuery, layout: TableLayout = .users, readers: [String]? = nil) throws -> PostgresRows {
        let compiled = try QueryCompiler.compileSelect(query, layout: layout, readerIDs: readers)
        return try connection.query(compiled.sql, compiled.parameters)
    }

    /// The object ids a `where` (JSON text) selects, in result order.
    func ids(_ whereJSON: String, order: String? = nil, limit: String? = nil, skip: String? = nil,
             layout: TableLayout = .users, readers: [String]? = nil) throws -> [String] {
        var parameters: [(name: String, value: String)] = [("where", whereJSON)]
        if let order { parameters.append(("order", order)) }
        if let limit { parameters.append(("limit", limit)) }
        if let skip { parameters.append(("skip", skip)) }
        let query = try ParseQuery.fromRequest(className: layout.className, parameters: parameters)
        return try rows(query, layout: layout, readers: readers).map { $0["object_id"].string ?? "" }
    }

    /// The compiled COUNT of a `where`.
    func count(_ whereJSON: String, layout: TableLayout = .users, readers: [String]? = nil) throws -> Int {
        let query = try ParseQuery.fromRequest(className: layout.className, parameters: [("where", whereJSON), ("count", "1")])
        let compiled = try QueryCompiler.compileCount(query, layout: layout, readerIDs: readers)
        return try connection.query(compiled.sql, compiled.parameters).first?["count"].int ?? -1
    }
}
