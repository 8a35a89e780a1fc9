import Foundation
import ParleyAccounts
import ParleyHTTP
import ParleyNet
import ParleyParse
import ParleyPostgres
import ParleyTestSupport
import Synchronization
import XCTest

/// A real HTTP server on 127.0.0.1 with the Parse API mounted at /parse, over a fresh migrated
/// database of the shared test cluster.
final class ParseHarness: @unchecked Sendable {
    let group: EventLoopGroup
    let pool: BlockingPool
    let database: PostgresClient
    let api: ParseAPI
    let server: HTTPServer
    /// The routes the server matches (for calling a route's two halves directly).
    let routes: RouteTable
    let appID = "test-app"
    let masterKey = "test-master"
    let restKey: String?
    /// Counts the requests that took the full (task) path rather than an inline answer.
    let fullPath = FullPathCounter()

    static var migrationsDirectory: String {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/") + "/migrations"
    }

    init(restKey: String? = nil, accounts: AccountsConfiguration = AccountsConfiguration(passwordOperationsLimit: 1, passwordMemoryLimit: 8192),
         serverURL: ParseServerURL = ParseServerURL(), regexLimit: RegexStatementLimit = RegexStatementLimit(),
         loginThrottle: LoginThrottle = LoginThrottle(), allowClientClassCreation: Bool = true,
         maxAnswerBytes: Int = 64 << 20, maxObjectBytes: Int = 16 << 20, maxBodyBytes: Int? = nil, files: ((BlockingPool) throws -> ParseFiles)? = nil) async throws {
        self.restKey = restKey
        let postgres = try TestPostgres.shared()
        let url = try postgres.makeDatabase(prefix: "parse")
        try Migrator(connectionString: url, directory: Self.migrationsDirectory).migrate()
        group = try EventLoopGroup(threads: 2)
        pool = try BlockingPool(threads: 2)
        database = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: url))
        database.start()
        try await database.waitUntilReady()
        api = ParseAPI(configuration: ParseConfiguration(applicationID: appID, masterKey: masterKey, restAPIKey: restKey,
                                                                 maxAnswerBytes: maxAnswerBytes, maxObjectBytes: maxObjectBytes, serverURL: serverURL,
                                                                 regexLimit: regexLimit, loginThrottle: loginThrottle,
                                                                 allowClientClassCreation: allowClientClassCreation),
                       accountsConfiguration: accounts, database: database, blockingPool: pool, files: try files?(pool))
        let router = Router()
        router.add(middleware: fullPath)
        api.register(on: router)
        routes = router.makeTable()
        var serverConfiguration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        if let maxBodyBytes { serverConfiguration.limits.maxBodyBytes = maxBodyBytes }
        server = HTTPServer(group: group, configuration: serverConfiguration, routes: routes)
        try server.start()
    }

    /// Makes this API a node that hears account events from others (LISTEN, as application
    /// `parley-events`), and waits until it does: until then its session cache serves nothing.
    func listenForAccountEvents() async throws {
        var configuration = database.configuration
        configuration.connectionString += " application_name=parley-events"
        api.accounts.events.startListening(on: group.loops[0], configuration: configuration)
        let deadline = ContinuousClock.now + .seconds(20)
        while !api.accounts.sessions.cache.isTrusted {
            guard ContinuousClock.now < deadline else { throw XCTSkip("the accounts LISTEN connection did not come up") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func shutdown() async {
        api.accounts.events.stopListening()
        server.quiesce()
        server.closeAll()
        await database.shutdown()
        pool.shutdown()
        group.shutdownGracefully()
    }

    struct Reply {
        let status: Int
        let headers: [(String, String)]
        let body: [UInt8]
        let json: Any?
        var object: [String: Any] { json as? [String: Any] ?? [:] }
        var code: Int? { object["code"] as? Int }
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        subscript(_ key: String) -> Any? { object[key] }
    }

    /// Sends one request with the app id (unless `appID` is nil) and optional token/master key.
    func call(_ method: String, _ path: String, body: Any? = nil, token: String? = nil, master: Bool = false,
              appID: String?? = .none, headers extra: [(String, String)] = [], rawBody: String? = nil) throws -> Reply {
        let client = try TestHTTPClient(port: server.port)
        var headers: [(String, String)] = []
        if let id = appID ?? self.appID { headers.append(("X-Parse-Application-Id", id)) }
        if let restKey { headers.append(("X-Parse-REST-API-Key", restKey)) }
        if let token { headers.append(("X-Parse-Session-Token", token)) }
        if master { headers.append(("X-Parse-Master-Key", masterKey)) }
        headers += extra
        var bytes: [UInt8]?
        if let rawBody {
            bytes = Array(rawBody.utf8)
        } else if let body {
            bytes = Array(try JSONSerialization.data(withJSONObject: body))
            headers.append(("Content-Type", "application/json"))
        }
        // The client closes its socket when it goes away (closing it here too would close
        // whatever socket another thread opened on the same descriptor number meanwhile).
        let response = try client.request(method, path, headers: headers, body: bytes)
        return Reply(status: response.status, headers: response.headers, body: response.body, json: response.json)
    }

    /// Signs up and returns (objectId, sessionToken).
    func signUp(_ username: String, password: String = "pw", extra: [String: Any] = [:]) throws -> (id: String, token: String) {
        var body: [String: Any] = ["username": username, "password": password]
        for (k, v) in extra { body[k] = v }
        let reply = try call("POST", "/parse/users", body: body)
        XCTAssertEqual(reply.status, 201, "\(reply.json ?? "")")
        return (reply["objectId"] as? String ?? "", reply["sessionToken"] as? String ?? "")
    }
}

/// Middleware that counts the requests it sees: inline answers skip middleware.
final class FullPathCounter: HTTPMiddleware {
    private let count = Atomic<Int>(0)

    var requests: Int { count.load(ordering: .relaxed) }

    func handle(_ request: HTTPRequest, context: RequestContext, next: (HTTPRequest, RequestContext) async throws -> HTTPResponse) async throws -> HTTPResponse {
        count.add(1, ordering: .relaxed)
        return try await next(request, context)
    }
}

func query(_ parameters: [String: String]) -> String {
    var components = URLComponents()
    components.queryItems = parameters.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
    return "?" + (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
}

func jsonText(_ value: Any) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: value), as: UTF8.self)
}
