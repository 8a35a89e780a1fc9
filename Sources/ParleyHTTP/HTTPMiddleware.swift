/// An asynchronous request handler.
public typealias HTTPHandler = @Sendable (HTTPRequest, RequestContext) async throws -> HTTPResponse

/// A synchronous handler the server runs inline on the connection's event loop (no task is
/// created): for cheap endpoints such as `/health`. It must not block.
public typealias HTTPInlineHandler = @Sendable (HTTPRequest, RequestContext) -> HTTPResponse

/// The inline half of an inline-first route: runs on the connection's event loop before any
/// middleware, with no `RequestContext` (none is built for a request answered inline). It
/// returns true when it takes the request, and then answers through the responder exactly once:
/// at once (a cache hit) or later on the same loop (a database read's completion). False hands
/// the request to the route's async handler. It must not block.
public typealias HTTPInlineAttempt = @Sendable (HTTPRequest, HTTPResponder) -> Bool

/// A step around async handlers (Hummingbird style): it may change the request or context,
/// answer early, or change the response `next` returns.
public protocol HTTPMiddleware: Sendable {
    func handle(
        _ request: HTTPRequest, context: RequestContext,
        next: (HTTPRequest, RequestContext) async throws -> HTTPResponse
    ) async throws -> HTTPResponse
}

/// Middleware composed around a handler, outermost first.
struct MiddlewareChain: Sendable {
    let middlewares: [any HTTPMiddleware]
    let handler: HTTPHandler

    func run(_ request: HTTPRequest, _ context: RequestContext) async throws -> HTTPResponse {
        try await run(request, context, from: 0)
    }

    private func run(_ request: HTTPRequest, _ context: RequestContext, from index: Int) async throws -> HTTPResponse {
        guard index < middlewares.count else { return try await handler(request, context) }
        return try await middlewares[index].handle(request, context: context) { request, context in
            try await run(request, context, from: index + 1)
        }
    }
}
