import Foundation
import ParleyAccounts
import ParleyJSON
import ParleyPostgres
import XCTest

/// The pgbench scripts under bench/accounts/ run exactly the SQL the compiler emits (with `$n`
/// written `:pn`), so the benchmarks measure what the server runs.
final class QueryBenchScriptTests: XCTestCase {
    private static let benchDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bench/accounts")

    /// The SQL statement of a pgbench script: every line that is not a comment or a meta-command,
    /// without the final semicolon.
    private func statement(of script: String) throws -> String {
        let text = try String(contentsOf: Self.benchDirectory.appendingPathComponent(script), encoding: .utf8)
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("--") && !$0.hasPrefix("\\") }
        var sql = lines.joined(separator: " ").trimmingCharacters(in: .whitespaces)
        if sql.hasSuffix(";") { sql.removeLast() }
        return sql
    }

    /// The compiled SQL with `$n` written as pgbench's `:pn`.
    private func pgbenchForm(_ sql: String) -> String {
        var result = ""
        var index = sql.startIndex
        while index < sql.endIndex {
            let character = sql[index]
            let next = sql.index(after: index)
            if character == "$", next < sql.endIndex, sql[next].isNumber {
                result += ":p"
            } else {
                result.append(character)
            }
            index = next
        }
        return result
    }

    func testNearbyScriptIsTheCompiledNearbyQuery() throws {
        let query = try ParseQuery.fromRequest(className: "_User", parameters: [
            ("where", #"{"location":{"$nearSphere":{"__type":"GeoPoint","latitude":48.9,"longitude":2.3},"$maxDistanceInKilometers":1}}"#),
        ])
        let compiled = try QueryCompiler.compileSelect(query, layout: .users, readerIDs: [])
        XCTAssertEqual(try statement(of: "nearby.sql"), pgbenchForm(compiled.sql))
        // nearby.sh passes p1, p2 and p5 with pgbench -D.
        XCTAssertEqual(compiled.parameters[0], .textArray(["*"]))
        XCTAssertEqual(compiled.parameters[1], .json(#"{"location":{"__type":"GeoPoint"}}"#))
        XCTAssertEqual(compiled.parameters[4], .double(2 * sin(1 / 6371 / 2)), "the chord nearby.sh computes with awk")
    }

    func testUsernameScriptIsTheCompiledUsernameQuery() throws {
        let query = try ParseQuery.fromRequest(className: "_User", parameters: [("where", #"{"username":"42"}"#)])
        let compiled = try QueryCompiler.compileSelect(query, layout: .users, readerIDs: [])
        XCTAssertEqual(try statement(of: "username.sql"), pgbenchForm(compiled.sql))
        XCTAssertEqual(compiled.parameters, [.textArray(["*"]), .text("42")])
    }
}
