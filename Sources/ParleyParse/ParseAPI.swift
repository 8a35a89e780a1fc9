import ParleyAccounts
import ParleyCloud
import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// The Parse-compatible REST API (users, sessions, classes, installations, batch), mounted
/// under one path. Create one per process and call `register(on:)` once at startup.
///
/// Every request takes one pipeline (docs/architecture.md, "Requests"): the router finds the
/// endpoint (`ParseEndpoint`, each registered once, as its route's payload); `serve` unpacks the
/// JavaScript SDK envelope, authorizes the request (`ParseAuthorizer`) and `run`s the endpoint;
/// `render` writes the response. A batch resolves its sub-requests in the same route table and
/// runs them through the same `run` with its own viewer. The inline answers (`/users/me` and
/// finds, on the event loop) make the same authorization from memory and write with the same
/// serializers, or decline.
public final class ParseAPI: Sendable {
    public let configuration: ParseConfiguration
    public let accounts: Accounts
    /// Cloud Code webhooks (`/hooks`, `/functions`, `/jobs`, triggers); nil: those routes 404.
    public let cloud: CloudCode?
    let logger: Logger
    let queries: QueryRunner
    let authorizer: ParseAuthorizer
    /// The router's table once the endpoints are registered, for batch sub-requests and the
    /// `_method` form.
    private let routeTable = Mutex<RouteTable?>(nil)

    /// An API over an existing `Accounts` domain (shared with the admin CLI or other services).
    public init(configuration: ParseConfiguration, accounts: Accounts, cloud: CloudCode? = nil, logger: Logger = Logger(label: "parse")) {
        self.configuration = configuration
        self.accounts = accounts
        self.cloud = cloud
        self.logger = logger
        queries = QueryRunner(regexLimit: configuration.regexLimit, schemas: accounts.schemas)
        authorizer = ParseAuthorizer(configuration: configuration, sessions: accounts.sessions, roles: accounts.roles)
    }

    /// An API with its own `Accounts` over `database`; password hashing runs on `blockingPool`.
    public convenience init(configuration: ParseConfiguration, accountsConfiguration: AccountsConfiguration = AccountsConfiguration(),
                            database: PostgresClient, blockingPool: BlockingPool, logger: Logger = Logger(label: "parse")) {
        self.init(configuration: configuration,
                  accounts: Accounts(database: database, blockingPool: blockingPool, configuration: accountsConfiguration, logger: logger),
                  logger: logger)
    }

    /// Registers every endpoint under `configuration.mountPath` on `router`, once.
    public func register(on router: Router) {
        let group = router.group(configuration.mountPath).answeringBodyTooLarge(with: Self.bodyTooLarge)
        registerEndpoints(on: group)
        // Anything else under the mount: the `_method` form of another route (an SDK's POST), or
        // a 404 in Parse's format.
        for method in [HTTPMethod.get, .post, .put, .delete] {
            group.on(method, "*") { [self] request, context in await serve(request, context: context, endpoint: nil) }
        }
        group.on(.options, "*") { _, _ in HTTPResponse(status: .ok, headers: Self.optionsHeaders, body: Array("{}".utf8)) }
        routeTable.withLock { $0 = router.makeTable() }
    }

    /// Registers `endpoint` at `pattern` below the mount, with its inline answer when it has one.
    func route(_ method: HTTPMethod, _ pattern: String, on group: RouterGroup, inline: HTTPInlineAttempt? = nil, _ endpoint: ParseEndpoint) {
        let handler: HTTPHandler = { [self] request, context in await serve(request, context: context, endpoint: endpoint) }
        if let inline {
            group.on(method, pattern, payload: endpoint, inline: inline, else: handler)
        } else {
            group.on(method, pattern, payload: endpoint, use: handler)
        }
    }

    // MARK: The pipeline

    /// Answers one request whose route the router matched (`endpoint` nil: the catch-all).
    func serve(_ request: HTTPRequest, context: RequestContext, endpoint matched: ParseEndpoint?) async -> HTTPResponse {
        let envelope = ParseEnvelope(request)
        let response: ParseResponse
        do {
            response = try await serve(request, envelope: envelope, endpoint: matched, peer: context.remoteAddress)
        } catch {
            response = errorResponse(error, path: request.path, logger: context.logger)
        }
        return render(response, method: request.method)
    }

    private func serve(_ request: HTTPRequest, envelope: ParseEnvelope, endpoint matched: ParseEndpoint?, peer: String) async throws -> ParseResponse {
        var endpoint = matched
        var parameters = request.parameters
        if envelope.method != request.method {
            // The `_method` form: the route of the effective method, in the same table.
            (endpoint, parameters) = resolve(try? HTTPRequestHead(method: envelope.method, target: request.head.target))
        }
        let auth = try await authorizer.authorize(request.head.headers, envelope, readsSession: endpoint?.readsSession ?? true, on: accounts.database)
        if let bodyError = envelope.bodyError { throw ParseFailure.parse(bodyError) }
        guard let endpoint else { throw ParseFailure.noRoute(method: envelope.method.rawValue, path: request.path) }
        let mount = configuration.mountPath == "/" ? "" : configuration.mountPath
        let parseRequest = ParseRequest(
            method: envelope.method, parameters: parameters, query: request.head.queryParameters, body: envelope.body,
            bodyIsQuery: envelope.bodyIsQuery, auth: auth, sessionToken: ParseCredential.sessionToken.string(in: request.head.headers, envelope),
            baseURL: configuration.serverURL.root(headers: request.headers, peer: peer) + mount, db: accounts.database,
            clientAddress: configuration.serverURL.clientAddress(headers: request.headers, peer: peer), headers: request.head.headers)
        return try await run(endpoint, parseRequest)
    }

    /// Runs an endpoint for an authorized request: every request and every batch sub-request
    /// passes here, so per-endpoint rules (the master key requirement, Cloud Code triggers
    /// around object writes; class-level permissions later) apply to both.
    func run(_ endpoint: ParseEndpoint, _ request: ParseRequest) async throws -> ParseResponse {
        if endpoint.requiresMaster && !request.auth.isMaster { throw ParseFailure.masterKeyRequired }
        if let cloud, let write = endpoint.write {
            return try await runWithTriggers(endpoint, write, request, cloud: cloud)
        }
        if let cloud, let read = endpoint.read {
            return try await runWithFindTriggers(endpoint, read, request, cloud: cloud)
        }
        return try await endpoint.handler(self, request)
    }

    /// The endpoint and parameters of a request head in the router's table; nil for an
    /// unroutable head and for routes that are not endpoints (the catch-all).
    func resolve(_ head: HTTPRequestHead?) -> (ParseEndpoint?, PathParameters) {
        guard let head, let table = routeTable.withLock({ $0 }), case .found(let route, let parameters) = table.match(head),
              let endpoint = route.payload as? ParseEndpoint else { return (nil, PathParameters()) }
        return (endpoint, parameters)
    }

    /// The response for a failed request; internal errors are logged, with `path`.
    func errorResponse(_ error: any Error, path: String, logger: Logger) -> ParseResponse {
        let failure = ParseFailure(error)
        if case .parse(.internalError(let detail)) = failure {
            logger.error("parse request failed", [("error", detail), ("path", path)])
        }
        return ParseErrorMapping.response(for: failure)
    }

    /// The HTTP response of a Parse response: the shared headers, the endpoint's, the body.
    func render(_ response: ParseResponse, method: HTTPMethod) -> HTTPResponse {
        var headers = method == .options ? Self.optionsHeaders : Self.baseHeaders
        for (name, value) in response.headers { headers.add(name, value) }
        return HTTPResponse(status: response.status, headers: headers, body: response.body)
    }

    // MARK: Inline answers

    /// `GET {mount}/users/me` answered on the event loop from the session and user caches, or
    /// nil when it needs the full path: the same authorization from memory, and the bytes
    /// `UserStore.me` answers from the same cache. A query string (`include`, `keys`) takes the
    /// full path, which shapes the answer.
    public func cachedMe(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == .get, request.body.isEmpty, request.head.query == nil,
              let auth = authorizer.authorizeFromMemory(request.head.headers, readsSession: true), let session = auth.user,
              let bytes = accounts.users.cache.serialized(session.userId, sessionToken: session.token) else { return nil }
        return render(.ok(bytes), method: .get)
    }

    /// A find answered from one read whose completion runs on the event loop, without a task:
    /// the same authorization from memory, query parser and `QueryRunner.find` as the full
    /// path. Declines (false) what only the full path answers: a body or the `_method` form, a
    /// session not cached, a `count` (two statements), a query the parser refuses (the full path
    /// words the error), a `$regex` (a transaction of its own), and `_Installation` and
    /// `_Session`, whose finds have rules of their own.
    func answerFind(_ request: HTTPRequest, className: String, respond: HTTPResponder) -> Bool {
        guard className != ClassName.installation, className != ClassName.session, className != CloudClassName.jobStatus, className != PushClassName.pushStatus,
              request.method == .get, request.body.isEmpty,
              let auth = authorizer.authorizeFromMemory(request.head.headers, readsSession: true),
              let query = try? ParseQuery.fromRequest(className: className, parameters: request.head.queryParameters),
              !query.count else { return false }
        // Classes with find triggers take the full path (and so does every class until this
        // node holds a trusted snapshot of the hooks).
        if let cloud {
            guard let table = cloud.hooks.cachedTable(), !table.hasFindTriggers(on: className) else { return false }
        }
        // The completion keeps the class name for the error log, not the request.
        return queries.find(query, auth: auth, on: accounts.database) { [self] result in
            switch result {
            case .success(let bytes):
                respond(render(.ok(bytes), method: .get))
            case .failure(let error):
                let path = className == ClassName.user ? "/users" : "/classes/" + className
                respond(render(errorResponse(error, path: configuration.mountPath + path, logger: logger), method: .get))
            }
        }
    }

    // MARK: Headers

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

    /// A body over the limit: what Parse Server answers (Express's body parser fails with 413
    /// "request entity too large", which its error handler writes as `{"error": message}`, no code).
    static let bodyTooLarge = HTTPResponse(
        status: .contentTooLarge, headers: baseHeaders, body: Array(#"{"error":"request entity too large"}"#.utf8))

    /// `baseHeaders` plus the preflight's, for `OPTIONS`.
    static let optionsHeaders: HTTPHeaders = {
        var headers = baseHeaders
        for (name, value) in preflightHeaders { headers.add(name, value) }
        return headers
    }()
}
