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
    /// The Files API's storage and limits (nil: uploads refused with 130).
    let files: ParseFiles?
    /// The router's table once the endpoints are registered, for batch sub-requests and the
    /// `_method` form.
    private let routeTable = Mutex<RouteTable?>(nil)

    /// An API over an existing `Accounts` domain (shared with the admin CLI or other services).
    public init(configuration: ParseConfiguration, accounts: Accounts, cloud: CloudCode? = nil, files: ParseFiles? = nil, logger: Logger = Logger(label: "parse")) {
        self.configuration = configuration
        self.files = files
        self.accounts = accounts
        self.cloud = cloud
        self.logger = logger
        queries = QueryRunner(regexLimit: configuration.regexLimit, schemas: accounts.schemas)
        authorizer = ParseAuthorizer(configuration: configuration, sessions: accounts.sessions, roles: accounts.roles)
    }

    /// An API with its own `Accounts` over `database`; password hashing runs on `blockingPool`.
    public convenience init(configuration: ParseConfiguration, accountsConfiguration: AccountsConfiguration = AccountsConfiguration(),
                            database: PostgresClient, blockingPool: BlockingPool, files: ParseFiles? = nil, logger: Logger = Logger(label: "parse")) {
        self.init(configuration: configuration,
                  accounts: Accounts(database: database, blockingPool: blockingPool, configuration: accountsConfiguration, logger: logger),
                  files: files, logger: logger)
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
            group.on(method, pattern, payload: endpoint, body: endpoint.rawBody ? .streamed(limit: files?.maxUploadBytes) : .buffered(), use: handler)
        }
    }

    // MARK: The pipeline

    /// Answers one request whose route the router matched (`endpoint` nil: the catch-all).
    func serve(_ request: HTTPRequest, context: RequestContext, endpoint matched: ParseEndpoint?) async -> HTTPResponse {
        let envelope = ParseEnvelope(request, rawBody: matched?.rawBody ?? false)
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
        var parseRequest = ParseRequest(
            method: envelope.method, parameters: parameters, query: request.head.queryParameters, body: envelope.body,
            bodyIsQuery: envelope.bodyIsQuery, auth: auth, sessionToken: ParseCredential.sessionToken.string(in: request.head.headers, envelope),
            baseURL: configuration.serverURL.root(headers: request.headers, peer: peer) + mount, db: accounts.database,
            clientAddress: configuration.serverURL.clientAddress(headers: request.headers, peer: peer), headers: request.head.headers)
        if endpoint.rawBody { parseRequest.rawBody = RawRequestBody(request) } else { parseRequest.bodyBytes = request.body.count }
        return try await run(endpoint, parseRequest)
    }

    /// Runs an endpoint for an authorized request: every request and every batch sub-request
    /// passes here, so per-endpoint rules (the master key requirement, class-level permissions,
    /// Cloud Code triggers around object writes) apply to both. Permissions come first: a refused
    /// request runs no trigger.
    func run(_ endpoint: ParseEndpoint, _ request: ParseRequest) async throws -> ParseResponse {
        if endpoint.requiresMaster && !request.auth.isMaster { throw ParseFailure.masterKeyRequired }
        if request.body != nil, !request.bodyIsQuery, Self.writesObject(endpoint, request) { try checkObjectSize(request) }
        var request = request
        if !request.auth.isMaster, let target = endpoint.classTarget?(request) {
            let info = try await accounts.schemas.classInfo(of: target.className, on: request.db)
            request.access = try classAccess(info, target, auth: request.auth)
        }
        if let cloud, let write = endpoint.write {
            return try await runWithTriggers(endpoint, write, request, cloud: cloud)
        }
        if let cloud, let read = endpoint.read {
            return try await runWithFindTriggers(endpoint, read, request, cloud: cloud)
        }
        return try await endpoint.handler(self, request)
    }

    /// Whether `endpoint` creates or updates an object from the request's body.
    private static func writesObject(_ endpoint: ParseEndpoint, _ request: ParseRequest) -> Bool {
        guard request.method == .post || request.method == .put else { return false }
        if let write = endpoint.write { return write.operation != .delete }
        return endpoint.classTarget?(request)?.operations.contains { $0 == .create || $0 == .update } ?? false
    }

    /// 116 for an object whose JSON is over `maxObjectBytes` (`--max-object-size`): the HTTP
    /// body's length when the request has one of its own, else the body serialized.
    private func checkObjectSize(_ request: ParseRequest) throws(ParseError) {
        let limit = configuration.maxObjectBytes
        if let bytes = request.bodyBytes, bytes <= limit { return }
        var serialized: [UInt8] = []
        JSONValue.object(request.object).serialize(into: &serialized)
        guard serialized.count <= limit else {
            throw ParseError.objectTooLarge("The object is larger than the \(limit) bytes this server stores (--max-object-size).")
        }
    }

    /// The class-level permissions step (the one place they are decided, for `run` and the inline
    /// finds): what `auth` (not master) may do with `target`'s class, whose stored schema is
    /// `info` (nil: the class does not exist). 119 for a class that does not exist unless clients
    /// may create classes (`allowClientClassCreation`), as Parse Server's
    /// `validateClientClassCreation`; then each operation's permission (119, or 101 for
    /// `requiresAuthentication`). The first operation's constraints are the request's.
    func classAccess(_ info: ClassInfo?, _ target: (className: String, operations: [ClassOperation]), auth: Auth) throws(ParseError) -> ClassAccess {
        guard let info else {
            guard configuration.allowClientClassCreation || ClassName.isSystem(target.className) else {
                throw ParseError.operationForbidden("This user is not allowed to access non-existent class: \(target.className)")
            }
            return .unrestricted
        }
        if info.isOpen { return .unrestricted }
        var access = ClassAccess.unrestricted
        for (position, operation) in target.operations.enumerated() {
            let granted = try info.permissions.access(operation, className: target.className, auth: auth)
            if position == 0 { access = granted }
        }
        return access
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
    /// A find's pages are streamed as the socket drains; a whole body over `maxAnswerBytes`
    /// answers 116 instead; one over `sliceAnswersAbove` goes out a slice at a time (the
    /// connection queues at most its output bound).
    func render(_ response: ParseResponse, method: HTTPMethod) -> HTTPResponse {
        var headers = method == .options ? Self.optionsHeaders : Self.baseHeaders
        for (name, value) in response.headers { headers.add(name, value) }
        if let pages = response.pages {
            return HTTPResponse(status: response.status, headers: headers, body: .stream(length: nil) { try await pages.next() })
        }
        if response.body.count > configuration.maxAnswerBytes {
            return render(ParseErrorMapping.response(for: .parse(.answerTooLarge(limit: configuration.maxAnswerBytes))), method: method)
        }
        if response.body.count > configuration.sliceAnswersAbove {
            return HTTPResponse(status: response.status, headers: headers, body: ResponseSlices.body(response.body, first: configuration.sliceAnswersAbove))
        }
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
        // Class-level permissions from the cached schema, as `run` decides them; a class not
        // cached, or a refusal, takes the full path (which words the error).
        var access = ClassAccess.unrestricted
        if !auth.isMaster {
            guard let cached = accounts.schemas.cachedClassInfo(of: className),
                  let granted = try? classAccess(cached, (className, [.find]), auth: auth) else { return false }
            access = granted
        }
        // The completion keeps the class name for the error log, not the request.
        return queries.find(query, auth: auth, access: access, on: accounts.database) { [self] result in
            switch result {
            case .success(let answer):
                respond(render(ParseResponse(answer: answer), method: .get))
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
