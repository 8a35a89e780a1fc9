/// What a route runs: inline on the loop, as a task through its middleware chain, or a
/// protocol switch.
public enum RouteHandler: Sendable {
    case inline(HTTPInlineHandler)
    case async(HTTPHandler)
    /// Tries the inline answer on the loop; when it declines (returns false), runs the async
    /// handler (with its middleware) as a task, as for `.async`.
    case inlineFirst(HTTPInlineAttempt, HTTPHandler)
    case upgrade(HTTPUpgradeHandler)
}

/// One registered route (a reference, so matching a request copies a pointer, not its fields).
public final class Route: Sendable {
    public let method: HTTPMethod
    /// The full pattern, prefixes included (`/parse/classes/:className`).
    public let pattern: String
    public let handler: RouteHandler
    /// The route's position in registration order on its router: a small number observers can
    /// index arrays with instead of hashing `pattern`.
    public let index: Int
    /// Names of the pattern's parameters in order (`*` for a trailing wildcard).
    let parameterNames: [String]
    /// For a route registered with `constant`: the response its inline handler returns, serialized.
    let constant: ConstantResponse?
    /// What the registering layer attached to the route (opaque to HTTP), so it can resolve
    /// requests of its own against the same table: Parse's batch sub-requests find their endpoint
    /// this way (`RouteTable.match(_:)`).
    public let payload: (any Sendable)?
    /// How the route receives a request body.
    public let bodyMode: HTTPBodyMode
    /// The answer to a body over the route's limit (nil: the server's plain 413).
    public let bodyTooLarge: HTTPResponse?

    init(method: HTTPMethod, pattern: String, handler: RouteHandler, index: Int, parameterNames: [String], constant: ConstantResponse?,
         payload: (any Sendable)?, bodyMode: HTTPBodyMode = .buffered(), bodyTooLarge: HTTPResponse? = nil) {
        self.method = method
        self.pattern = pattern
        self.handler = handler
        self.index = index
        self.parameterNames = parameterNames
        self.constant = constant
        self.payload = payload
        self.bodyMode = bodyMode
        self.bodyTooLarge = bodyTooLarge
    }

    /// The handler gets the body through `request.bodyStream` as it arrives.
    var streamsBody: Bool {
        if case .streamed = bodyMode { return true }
        return false
    }

    /// The route's body limit; nil: the server's `maxBodyBytes`.
    var bodyLimit: Int? {
        switch bodyMode {
        case .buffered(let limit), .streamed(let limit): limit
        }
    }
}

/// Collects routes and middleware at startup; the server turns it into a `RouteTable`.
///
/// Patterns are `/`-separated segments: literals, `:name` parameters, and a trailing `*` that
/// matches the rest of the path (zero or more segments, available as parameter `"*"`). Empty
/// segments are ignored, so `/a//b/` matches `/a/b`. Literals win over parameters, parameters over
/// `*`, with backtracking. Middleware added with `add(middleware:)` wraps the async routes
/// registered after it; inline routes skip middleware, and so does the inline answer of an
/// inline-first route (`on(_:_:inline:else:)`), while its async fallback runs through it.
public final class Router {
    private var routes: [Route] = []
    private var shapes: Set<String> = []
    private var middlewares: [any HTTPMiddleware] = []

    public init() {}

    /// Wraps the async routes registered from now on (on this router and groups made later).
    @discardableResult
    public func add(middleware: any HTTPMiddleware) -> Router {
        middlewares.append(middleware)
        return self
    }

    /// Registers an async handler (with an optional `payload`, see `Route.payload`).
    @discardableResult
    public func on(
        _ method: HTTPMethod, _ pattern: String, payload: (any Sendable)? = nil, body: HTTPBodyMode = .buffered(),
        use handler: @escaping HTTPHandler
    ) -> Router {
        register(method, pattern, middlewares: middlewares, payload: payload, body: body, handler: handler)
        return self
    }

    /// Registers an inline-first route: `inline` runs on the event loop for each request, without
    /// middleware, context or task; when it returns false the request goes to `handler`, which
    /// runs as a task through the current middleware exactly like a route registered with
    /// `on(_:_:use:)`.
    ///
    /// For endpoints that can usually answer from memory (a cached `/users/me`) or from one
    /// database read whose completion runs on the loop (a find). Whatever checks the middleware
    /// would make (authentication, rate limits) `inline` must make itself, or return false;
    /// logging middleware does not see inline answers (the observer does).
    @discardableResult
    public func on(_ method: HTTPMethod, _ pattern: String, payload: (any Sendable)? = nil, inline: @escaping HTTPInlineAttempt,
                   else handler: @escaping HTTPHandler) -> Router {
        register(method, pattern, middlewares: middlewares, inline: inline, payload: payload, handler: handler)
        return self
    }

    /// Registers a handler that runs inline on the event loop, without middleware or a task.
    @discardableResult
    public func inline(_ method: HTTPMethod, _ pattern: String, use handler: @escaping HTTPInlineHandler) -> Router {
        register(method, pattern, handler: .inline(handler))
        return self
    }

    /// Registers an inline route that always answers `response` (health checks, fixed documents).
    ///
    /// The same as `inline` with a handler returning `response`, but the response is serialized
    /// once here and each request only copies its bytes around the current `Date` line: no request
    /// value, context or handler call.
    @discardableResult
    public func constant(_ method: HTTPMethod, _ pattern: String, response: HTTPResponse) -> Router {
        register(method, pattern, handler: .inline({ _, _ in response }), constant: ConstantResponse(response))
        return self
    }

    /// Registers a `GET` route for protocol upgrades (WebSocket): `handler` runs on the loop once
    /// every earlier response on the connection is written. A request without `Connection: upgrade`
    /// and `Upgrade` gets 426 without calling it.
    @discardableResult
    public func upgrade(_ pattern: String, use handler: @escaping HTTPUpgradeHandler) -> Router {
        register(.get, pattern, handler: .upgrade(handler))
        return self
    }

    @discardableResult public func get(_ pattern: String, use handler: @escaping HTTPHandler) -> Router { on(.get, pattern, use: handler) }
    @discardableResult public func post(_ pattern: String, use handler: @escaping HTTPHandler) -> Router { on(.post, pattern, use: handler) }
    @discardableResult public func put(_ pattern: String, use handler: @escaping HTTPHandler) -> Router { on(.put, pattern, use: handler) }
    @discardableResult public func patch(_ pattern: String, use handler: @escaping HTTPHandler) -> Router { on(.patch, pattern, use: handler) }
    @discardableResult public func delete(_ pattern: String, use handler: @escaping HTTPHandler) -> Router { on(.delete, pattern, use: handler) }

    /// A group whose patterns start with `prefix` and which carries the router's current middleware.
    public func group(_ prefix: String) -> RouterGroup {
        RouterGroup(router: self, prefix: prefix, middlewares: middlewares)
    }

    /// The immutable, thread-safe lookup structure for the routes registered so far.
    public func makeTable() -> RouteTable {
        RouteTable(routes: routes)
    }

    func register(
        _ method: HTTPMethod, _ pattern: String, middlewares: [any HTTPMiddleware], inline: HTTPInlineAttempt? = nil,
        payload: (any Sendable)? = nil, body: HTTPBodyMode = .buffered(), bodyTooLarge: HTTPResponse? = nil, handler: @escaping HTTPHandler
    ) {
        var wrapped = handler
        if !middlewares.isEmpty {
            let chain = MiddlewareChain(middlewares: middlewares, handler: handler)
            wrapped = { (request: HTTPRequest, context: RequestContext) async throws -> HTTPResponse in
                try await chain.run(request, context)
            }
        }
        if let inline {
            register(method, pattern, handler: .inlineFirst(inline, wrapped), payload: payload, body: body, bodyTooLarge: bodyTooLarge)
        } else {
            register(method, pattern, handler: .async(wrapped), payload: payload, body: body, bodyTooLarge: bodyTooLarge)
        }
    }

    func register(
        _ method: HTTPMethod, _ pattern: String, handler: RouteHandler, constant: ConstantResponse? = nil, payload: (any Sendable)? = nil,
        body: HTTPBodyMode = .buffered(), bodyTooLarge: HTTPResponse? = nil
    ) {
        let segments = RoutePattern.segments(of: pattern)
        let canonical = RoutePattern.canonical(segments)
        let shape = "\(method.rawValue) " + segments.map { segment in
            switch segment {
            case .literal(let bytes): String(decoding: bytes, as: UTF8.self)
            case .parameter: ":"
            case .wildcard: "*"
            }
        }.joined(separator: "/")
        precondition(shapes.insert(shape).inserted, "Router: duplicate route \(method) \(canonical)")
        let names = segments.compactMap { segment -> String? in
            switch segment {
            case .literal: nil
            case .parameter(let name): name
            case .wildcard: "*"
            }
        }
        routes.append(Route(
            method: method, pattern: canonical, handler: handler, index: routes.count, parameterNames: names, constant: constant,
            payload: payload, bodyMode: body, bodyTooLarge: bodyTooLarge))
    }
}

/// Routes under a common prefix with their own middleware (e.g. everything under `/parse`).
public struct RouterGroup {
    let router: Router
    let prefix: String
    let middlewares: [any HTTPMiddleware]
    /// The answer to a body over its route's limit for the async routes of this group (nil: plain 413).
    let bodyTooLarge: HTTPResponse?

    init(router: Router, prefix: String, middlewares: [any HTTPMiddleware], bodyTooLarge: HTTPResponse? = nil) {
        self.router = router
        self.prefix = prefix
        self.middlewares = middlewares
        self.bodyTooLarge = bodyTooLarge
    }

    /// A copy of this group that also wraps its async routes in `middleware`.
    public func add(middleware: any HTTPMiddleware) -> RouterGroup {
        RouterGroup(router: router, prefix: prefix, middlewares: middlewares + [middleware], bodyTooLarge: bodyTooLarge)
    }

    /// A nested group.
    public func group(_ prefix: String) -> RouterGroup {
        RouterGroup(router: router, prefix: RoutePattern.join(self.prefix, prefix), middlewares: middlewares, bodyTooLarge: bodyTooLarge)
    }

    /// A copy of this group whose async routes answer a body over their limit with `response`
    /// (413 in the API's own error format) instead of the server's plain 413.
    public func answeringBodyTooLarge(with response: HTTPResponse) -> RouterGroup {
        RouterGroup(router: router, prefix: prefix, middlewares: middlewares, bodyTooLarge: response)
    }

    /// An async route; `body` says how it receives a request body (buffered up to a limit, or streamed).
    @discardableResult
    public func on(
        _ method: HTTPMethod, _ pattern: String, payload: (any Sendable)? = nil, body: HTTPBodyMode = .buffered(),
        use handler: @escaping HTTPHandler
    ) -> RouterGroup {
        router.register(
            method, RoutePattern.join(prefix, pattern), middlewares: middlewares, payload: payload, body: body, bodyTooLarge: bodyTooLarge,
            handler: handler)
        return self
    }

    /// See `Router.on(_:_:inline:else:)`: the async fallback runs through this group's middleware.
    @discardableResult
    public func on(_ method: HTTPMethod, _ pattern: String, payload: (any Sendable)? = nil, inline: @escaping HTTPInlineAttempt,
                   else handler: @escaping HTTPHandler) -> RouterGroup {
        router.register(
            method, RoutePattern.join(prefix, pattern), middlewares: middlewares, inline: inline, payload: payload, bodyTooLarge: bodyTooLarge,
            handler: handler)
        return self
    }

    @discardableResult
    public func inline(_ method: HTTPMethod, _ pattern: String, use handler: @escaping HTTPInlineHandler) -> RouterGroup {
        router.register(method, RoutePattern.join(prefix, pattern), handler: .inline(handler))
        return self
    }

    /// See `Router.constant(_:_:response:)`.
    @discardableResult
    public func constant(_ method: HTTPMethod, _ pattern: String, response: HTTPResponse) -> RouterGroup {
        router.register(method, RoutePattern.join(prefix, pattern), handler: .inline({ _, _ in response }), constant: ConstantResponse(response))
        return self
    }

    /// See `Router.upgrade(_:use:)`.
    @discardableResult
    public func upgrade(_ pattern: String, use handler: @escaping HTTPUpgradeHandler) -> RouterGroup {
        router.register(.get, RoutePattern.join(prefix, pattern), handler: .upgrade(handler))
        return self
    }

    @discardableResult public func get(_ pattern: String, use handler: @escaping HTTPHandler) -> RouterGroup { on(.get, pattern, use: handler) }
    @discardableResult public func post(_ pattern: String, use handler: @escaping HTTPHandler) -> RouterGroup { on(.post, pattern, use: handler) }
    @discardableResult public func put(_ pattern: String, use handler: @escaping HTTPHandler) -> RouterGroup { on(.put, pattern, use: handler) }
    @discardableResult public func patch(_ pattern: String, use handler: @escaping HTTPHandler) -> RouterGroup { on(.patch, pattern, use: handler) }
    @discardableResult public func delete(_ pattern: String, use handler: @escaping HTTPHandler) -> RouterGroup { on(.delete, pattern, use: handler) }
}

/// Route pattern syntax.
enum RoutePattern {
    enum Segment: Sendable, Equatable {
        case literal([UInt8])
        case parameter(String)
        case wildcard
    }

    static func segments(of pattern: String) -> [Segment] {
        let parts = pattern.split(separator: "/", omittingEmptySubsequences: true)
        var result: [Segment] = []
        var names: Set<String> = []
        for (index, part) in parts.enumerated() {
            if part == "*" {
                precondition(index == parts.count - 1, "Router: `*` must be the last segment in \(pattern)")
                result.append(.wildcard)
            } else if part.hasPrefix(":") {
                let name = String(part.dropFirst())
                precondition(!name.isEmpty && name != "*", "Router: empty parameter name in \(pattern)")
                precondition(names.insert(name).inserted, "Router: parameter :\(name) repeated in \(pattern)")
                result.append(.parameter(name))
            } else {
                result.append(.literal(Array(part.utf8)))
            }
        }
        return result
    }

    static func canonical(_ segments: [Segment]) -> String {
        "/" + segments.map { segment in
            switch segment {
            case .literal(let bytes): String(decoding: bytes, as: UTF8.self)
            case .parameter(let name): ":" + name
            case .wildcard: "*"
            }
        }.joined(separator: "/")
    }

    static func join(_ prefix: String, _ pattern: String) -> String {
        let segments = segments(of: prefix)
        precondition(!segments.contains(.wildcard), "Router: a group prefix cannot end in `*` (\(prefix))")
        return canonical(segments + self.segments(of: pattern))
    }
}
