import ParleyAccounts
import ParleyJSON
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// A migrated database on the shared test cluster with an `Accounts` over it (cheap argon2id).
final class AccountsHarness: Sendable {
    let group: EventLoopGroup
    let pool: BlockingPool
    let client: PostgresClient
    let accounts: Accounts
    let connectionString: String

    static var migrationsDirectory: String {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/") + "/migrations"
    }

    init(prefix: String = "acct", configuration: AccountsConfiguration = AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192)) async throws {
        let postgres = try TestPostgres.shared()
        connectionString = try postgres.makeDatabase(prefix: prefix)
        try Migrator(connectionString: connectionString, directory: Self.migrationsDirectory).migrate()
        group = try EventLoopGroup(threads: 1)
        pool = try BlockingPool(threads: 2)
        client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: connectionString))
        client.start()
        try await client.waitUntilReady()
        accounts = Accounts(database: client, blockingPool: pool, configuration: configuration)
    }

    func shutdown() async {
        await client.shutdown()
        pool.shutdown()
        group.shutdownGracefully()
    }

    /// Signs up `username` with password "pw" (plus `fields`) and returns the result.
    func signUp(_ username: String, password: String = "pw", email: String? = nil, fields: JSONObject = [:]) async throws -> UserStore.SignUpResult {
        var body: JSONObject = ["username": .string(username), "password": .string(password)]
        if let email { body["email"] = .string(email) }
        for (k, v) in fields { body[k] = v }
        return try await accounts.users.signUp(body: body, auth: .anonymous, on: client)
    }

    func auth(_ result: UserStore.SignUpResult) -> Auth {
        Auth(isMaster: false, user: result.session, installationId: nil)
    }
}

/// Asserts that `body` throws a ParseError with `code`.
func XCTAssertParseError<T>(_ code: Int, _ body: () async throws -> T, file: StaticString = #filePath, line: UInt = #line) async {
    do {
        _ = try await body()
        XCTFail("expected Parse error \(code)", file: file, line: line)
    } catch let error as ParseError {
        XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
    } catch {
        XCTFail("expected Parse error \(code), got \(error)", file: file, line: line)
    }
}

extension Result {
    /// Runs an async throwing body and captures its outcome.
    init(_ body: () async throws(Failure) -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }

    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A JSON object the stores wrote (they answer serialized JSON).
func parsed(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> JSONObject {
    guard case .object(let object) = try JSONParser().parse(bytes) else {
        XCTFail("not a JSON object: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
        return JSONObject()
    }
    return object
}

/// The objects of a `{"results":[…]}` body.
func parsedResults(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> [JSONObject] {
    guard case .array(let items)? = try parsed(bytes, file: file, line: line)["results"] else {
        XCTFail("no results array: \(String(decoding: bytes, as: UTF8.self))", file: file, line: line)
        return []
    }
    return items.compactMap { if case .object(let object) = $0 { object } else { nil } }
}
