import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// The Parse-compatible REST API (users, sessions, classes, installations, batch), mounted
/// under one path. Create one per process and call `register(on:)` once at startup.
public final class ParseAPI: Sendable {
    public let configuration: ParseConfiguration
    public let accounts: Accounts
    let logger: Logger
    let queries = QueryRunner()
    private let routes: ParseRoutes

    /// An API over an existing `Accounts` domain (shared with the admin CLI or other services).
    public init(configuration: ParseConfiguration, accounts: Accounts, logger: Logger = Logger(label: "parse")) {
        self.configuration = configuration
        self.accounts = accounts
        self.logger = logger
        self.routes = ParseAPI.makeRoutes()
    }

    /// An API with its own `Accounts` over `database`; password hashing runs on `blockingPool`.
    public convenience init(configuration: ParseConfiguration, accountsConfiguration: AccountsConfiguration = AccountsConfiguration(),
                            database: PostgresClient, blockingPool: BlockingPool, logger: Logger = Logger(label: "parse")) {
        self.init(configuration: configuration,
                  accounts: Accounts(database: database, blockingPool: blockingPool, configuration: accountsConfiguration, logger: logger),
                  logger: logger)
    }

    /// Registers the API's routes under `configuration.mountPath` on `router`.
    public func register(on router: Router) {
        register(on: router.group(configuration.mountPath))
    }

    /// Registers the API's routes on a group whose prefix is the mount path.
    public func register(on group: RouterGroup) {
        let handler: HTTPHandler = { [self] request, context in await self.handle(request, context: context) }
        // A cache hit answers on the event loop, and a find answers from its read's completion
        // there; both make the same app id, REST key and session checks as `prepare`, and
        // anything they cannot answer takes the full path.
        group.on(.get, "/users/me", inline: { [self] request, respond in
            guard let response = cachedMe(request) else { return false }
            respond(response)
            return true
        }, else: handler)
        group.on(.get, "/users", inline: { [self] request, respond in
            answerFind(request, className: ClassName.user, respond: respond)
        }, else: handler)
        group.on(.get, "/classes/:className", inline: { [self] request, respond in
            answerFind(request, className: request.parameters["className"] ?? "", respond: respond)
        }, else: handler)
        for method in [HTTPMethod.get, .post, .put, .delete, .options] {
            group.on(method, "*", use: handler)
        }
    }

    /// `GET {mount}/users/me` answered synchronously from the session and user caches, or nil
    /// when it needs the full (async) path: the inline half of the `/users/me` route.
    /// It answers only what `handle` would answer the same way: a GET without body, the right
    /// app id (and REST key when one is configured), a live cached session and a cached user.
    public func cachedMe(_ request: HTTPRequest) -> HTTPResponse? {
        // The token is looked up where it lies in the head; a cached session holds it as a string.
        let cache = accounts.sessions.cache
        guard request.method == .get, request.body.isEmpty, keysCheckOut(request),
              let found = request.head.headers.withFirstValue("X-Parse-Session-Token", { cache.get(token: $0) }),
              let session = found,
              let bytes = accounts.users.cache.serialized(session.userId, sessionToken: session.token) else { return nil }
        return HTTPResponse(status: .ok, headers: Self.baseHeaders, body: bytes)
    }

    /// `GET {mount}/users` or `GET {mount}/classes/:className` answered from one read whose
    /// completion runs on the event loop, without a task: the inline half of the find routes.
    /// Returns false (the full path) for anything `handle` might answer differently: a body, a
    /// master key, a session token whose session is not cached, a `count`, an invalid query
    /// (the full path words the error), and `_Installation` and `_Session`, whose finds have rules
    /// of their own.
    func answerFind(_ request: HTTPRequest, className: String, respond: HTTPResponder) -> Bool {
        guard className != ClassName.installation, className != ClassName.session,
              request.method == .get, request.body.isEmpty, request.headers["X-Parse-Master-Key"] == nil,
              keysCheckOut(request) else { return false }
        var session: SessionInfo?
        if let token = request.headers["X-Parse-Session-Token"], !token.isEmpty {
            guard let cached = accounts.sessions.cache.get(token) else { return false }
            session = cached
        }
        guard let query = try? ParseQuery.fromRequest(className: className, parameters: request.head.queryParameters),
              !query.count else { return false }
        let auth = Auth(isMaster: false, user: session, installationId: request.headers["X-Parse-Installation-Id"] ?? session?.installationId)
        // The completion keeps the class name for the error log, not the request.
        queries.findJSON(query, auth: auth, on: accounts.database) { [self] result in
            switch result {
            case .success(let bytes):
                respond(HTTPResponse(status: .ok, headers: Self.baseHeaders, body: bytes))
            case .failure(let error):
                let path = className == ClassName.user ? "/users" : "/classes/" + className
                respond(render(errorResponse(error, path: configuration.mountPath + path, logger: logger), method: .get))
            }
        }
        return true
    }

    /// Whether the request carries the app id and, when one is configured, the REST key.
    private func keysCheckOut(_ request: HTTPRequest) -> Bool {
        // The values are compared where they lie in the head, without making strings.
        let headers = request.head.headers
        if let restKey = configuration.restAPIKey {
            guard headers.withFirstValue("X-Parse-REST-API-Key", { constantTimeEquals($0, restKey) }) == true else { return false }
        }
        return headers.withFirstValue("X-Parse-Application-Id") { constantTimeEquals($0, configuration.applicationID) } == true
    }

    // MARK: Request handling

    /// Answers one HTTP request under the mount path.
    public func handle(_ request: HTTPRequest, context: RequestContext) async -> HTTPResponse {
        if request.method == .options {
            return render(ParseResponse(body: .object(JSONObject())), method: .options)
        }
        let envelope = ParseEnvelope(request)
        let response: ParseResponse
        do {
            let parseRequest = try await prepare(request, envelope: envelope)
            response = try await dispatch(parseRequest)
        } catch {
            response = errorResponse(error, path: request.path, logger: context.logger)
        }
        return render(response, method: request.method)
    }

    /// The response for a failed request; internal errors are logged, with `path`.
    private func errorResponse(_ error: any Error, path: String, logger: Logger) -> ParseResponse {
        let failure = Self.failure(error)
        if case .parse(.internalError(let detail)) = failure {
            logger.error("parse request failed", [("error", detail), ("path", path)])
        }
        return ParseErrorMapping.response(for: failure)
    }

    /// Checks the app id and keys, resolves the session, and builds the `ParseRequest`.
    private func prepare(_ request: HTTPRequest, envelope: ParseEnvelope) async throws -> ParseRequest {
        guard let appID = envelope.applicationID, constantTimeEquals(appID, configuration.applicationID) else {
            throw ParseFailure.unauthorized
        }
        var isMaster = false
        if let configured = configuration.masterKey, let given = envelope.masterKey {
            isMaster = constantTimeEquals(given, configured)
        }
        if !isMaster, let configured = configuration.restAPIKey {
            guard let given = envelope.restAPIKey, constantTimeEquals(given, configured) else { throw ParseFailure.unauthorized }
        }
        if let bodyError = envelope.bodyError { throw ParseFailure.parse(bodyError) }
        let path = subpath(request.path)
        let db: any SQLExecutor = accounts.database
        var user: SessionInfo?
        if let token = envelope.sessionToken, !token.isEmpty, path != "/login" {
            do {
                user = try await accounts.sessions.lookup(token, on: db)
            } catch {
                if !isMaster { throw error }
            }
        }
        let host = request.headers["Host"] ?? "localhost"
        let scheme = request.headers["X-Forwarded-Proto"] == "https" ? "https" : "http"
        return ParseRequest(
            method: envelope.method, path: path, query: request.head.queryParameters, body: envelope.body,
            bodyIsQuery: envelope.bodyIsQuery,
            auth: Auth(isMaster: isMaster, user: user, installationId: envelope.installationID ?? user?.installationId),
            sessionToken: envelope.sessionToken.flatMap { $0.isEmpty ? nil : $0 },
            host: host, scheme: scheme, mountPath: configuration.mountPath, db: db)
    }

    /// Runs the endpoint for a prepared request.
    func dispatch(_ request: ParseRequest) async throws -> ParseResponse {
        guard let (handler, parameters) = routes.match(request.method, path: request.path) else {
            throw ParseFailure.noRoute(method: request.method.rawValue, path: configuration.mountPath + request.path)
        }
        var request = request
        request.parameters = parameters
        return try await handler(self, request)
    }

    /// The path below the mount path.
    func subpath(_ path: String) -> String {
        let mount = configuration.mountPath
        guard mount != "/" else { return path }
        guard path.hasPrefix(mount) else { return path }
        let rest = String(path.dropFirst(mount.count))
        return rest.isEmpty ? "/" : rest
    }

    static func failure(_ error: any Error) -> ParseFailure {
        switch error {
        case let failure as ParseFailure: failure
        case let error as ParseError: .parse(error)
        default: .parse(.internalError("\(error)"))
        }
    }

    /// CORS: any origin may read every response. A preflight (`OPTIONS`) also names the methods
    /// and request headers allowed; browsers read those two only from a preflight's answer (Fetch
    /// standard), so other responses leave them out. Parse Server sends them on every response:
    /// about 370 bytes each.
    static let corsHeaders: [(String, String)] = [("Access-Control-Allow-Origin", "*")]
    static let preflightHeaders: [(String, String)] = [
        ("Access-Control-Allow-Methods", "GET,PUT,POST,DELETE,OPTIONS"),
        ("Access-Control-Allow-Headers", "X-Parse-Master-Key, X-Parse-REST-API-Key, X-Parse-Javascript-Key, X-Parse-Application-Id, X-Parse-Client-Version, X-Parse-Session-Token, X-Parse-Installation-Id, X-Requested-With, X-Parse-Revocable-Session, X-Parse-Request-Id, Content-Type, Pragma, Cache-Control"),
    ]

    /// Content type and CORS headers, built once and shared (copy-on-write) by every response.
    static let baseHeaders: HTTPHeaders = {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json; charset=utf-8")
        for (name, value) in corsHeaders { headers.add(name, value) }
        return headers
    }()

    /// `baseHeaders` plus the preflight's, for `OPTIONS`.
    static let optionsHeaders: HTTPHeaders = {
        var headers = baseHeaders
        for (name, value) in preflightHeaders { headers.add(name, value) }
        return headers
    }()

    private func render(_ response: ParseResponse, method: HTTPMethod) -> HTTPResponse {
        var headers = method == .options ? Self.optionsHeaders : Self.baseHeaders
        for (name, value) in response.headers { headers.add(name, value) }
        var body: [UInt8]
        if let raw = response.rawBody {
            body = raw
        } else {
            body = []
            body.reserveCapacity(512)
            response.body.serialize(into: &body)
        }
        return HTTPResponse(status: response.status, headers: headers, body: body)
    }
}
