import ParleyNet
import Synchronization
import XCTest
@testable import ParleyHTTP

final class RouterTests: XCTestCase {
    private func text(_ value: String) -> HTTPHandler {
        { _, _ in HTTPResponse(body: value) }
    }

    private func matched(_ table: RouteTable, _ method: HTTPMethod, _ path: String) -> (pattern: String, method: HTTPMethod, parameters: PathParameters)? {
        guard case .found(let route, let parameters) = table.match(method, path: path) else { return nil }
        return (route.pattern, route.method, parameters)
    }

    func testLiteralParameterAndWildcardRoutes() {
        let router = Router()
        router.get("/health", use: text("health"))
        router.get("/users/:id", use: text("user"))
        router.get("/users/me", use: text("me"))
        router.get("/users/:id/posts/:post", use: text("post"))
        router.get("/files/*", use: text("files"))
        let table = router.makeTable()

        XCTAssertEqual(matched(table, .get, "/health")?.pattern, "/health")
        XCTAssertEqual(matched(table, .get, "/health/")?.pattern, "/health")
        XCTAssertEqual(matched(table, .get, "//health")?.pattern, "/health")
        XCTAssertEqual(matched(table, .get, "/users/me")?.pattern, "/users/me")
        XCTAssertEqual(matched(table, .get, "/users/42")?.parameters, PathParameters([("id", "42")]))
        XCTAssertEqual(matched(table, .get, "/users/me/posts/7")?.parameters, PathParameters([("id", "me"), ("post", "7")]))
        XCTAssertEqual(matched(table, .get, "/users/a%20b")?.parameters["id"], "a b")
        XCTAssertEqual(matched(table, .get, "/users/a%2Fb")?.parameters["id"], "a/b")
        XCTAssertEqual(matched(table, .get, "/files/a/b/c.txt")?.parameters["*"], "a/b/c.txt")
        XCTAssertEqual(matched(table, .get, "/files")?.parameters["*"], "")
        XCTAssertEqual(matched(table, .get, "/he%61lth")?.pattern, "/health")
        guard case .notFound = table.match(.get, path: "/nothing") else { return XCTFail() }
        guard case .notFound = table.match(.get, path: "/users") else { return XCTFail() }
        guard case .notFound = table.match(.get, path: "/users/1/posts") else { return XCTFail() }
        guard case .notFound = table.match(.get, path: "/") else { return XCTFail() }
    }

    func testMethodNotAllowedListsAllowedMethods() {
        let router = Router()
        router.get("/items/:id", use: text("get"))
        router.put("/items/:id", use: text("put"))
        router.delete("/items/:id", use: text("delete"))
        router.post("/items", use: text("create"))
        let table = router.makeTable()
        guard case .methodNotAllowed(let allowed) = table.match(.post, path: "/items/3") else { return XCTFail() }
        XCTAssertEqual(allowed, [.get, .head, .put, .delete])
        guard case .methodNotAllowed(let allowedRoot) = table.match(.get, path: "/items") else { return XCTFail() }
        XCTAssertEqual(allowedRoot, [.post])
        XCTAssertEqual(matched(table, .head, "/items/3")?.method, .get, "HEAD falls back to GET")
    }

    func testBacktrackingPrefersAMethodMatch() {
        let router = Router()
        router.get("/users/me", use: text("me"))
        router.post("/users/:id", use: text("update"))
        let table = router.makeTable()
        XCTAssertEqual(matched(table, .post, "/users/me")?.pattern, "/users/:id")
        XCTAssertEqual(matched(table, .get, "/users/me")?.pattern, "/users/me")
        guard case .methodNotAllowed(let allowed) = table.match(.delete, path: "/users/me") else { return XCTFail() }
        XCTAssertEqual(allowed, [.get, .head, .post])
    }

    func testGroupsMountPrefixesAndMiddlewareRunsInOrder() async throws {
        let router = Router()
        router.add(middleware: Tag("outer"))
        let parse = router.group("/parse").add(middleware: Tag("parse"))
        parse.get("/classes/:className") { request, context in
            HTTPResponse(headers: request.headers, body: "class \(context.parameters["className"] ?? "?")")
        }
        parse.group("users").add(middleware: Tag("users")).get("/") { request, _ in
            HTTPResponse(headers: request.headers, body: "users")
        }
        router.get("/plain") { request, _ in HTTPResponse(headers: request.headers) }
        router.inline(.get, "/health") { _, _ in HTTPResponse(body: "ok") }
        let table = router.makeTable()
        XCTAssertEqual(table.routes.map(\.pattern), ["/parse/classes/:className", "/parse/users", "/plain", "/health"])

        let classResponse = try await run(table, .get, "/parse/classes/GameScore")
        XCTAssertEqual(String(decoding: classResponse.bodyBytes, as: UTF8.self), "class GameScore")
        XCTAssertEqual(classResponse.headers.values("X-Tag"), ["outer", "parse"])
        XCTAssertEqual(classResponse.headers.values("X-Trail"), ["parse", "outer"], "responses unwind innermost first")

        let users = try await run(table, .get, "/parse/users")
        XCTAssertEqual(users.headers.values("X-Tag"), ["outer", "parse", "users"])

        let plain = try await run(table, .get, "/plain")
        XCTAssertEqual(plain.headers.values("X-Tag"), ["outer"])

        guard case .found(let health, _) = table.match(.get, path: "/health"), case .inline(let inline) = health.handler else {
            return XCTFail("inline route")
        }
        let request = HTTPRequest(head: try HTTPRequestHead(method: .get, target: "/health"))
        XCTAssertEqual(inline(request, RequestContext(loop: try Self.loop())).bodyBytes, Array("ok".utf8))
    }

    func testMiddlewareCanAnswerEarly() async throws {
        struct Deny: HTTPMiddleware {
            func handle(_ request: HTTPRequest, context: RequestContext, next: (HTTPRequest, RequestContext) async throws -> HTTPResponse) async throws -> HTTPResponse {
                request.headers["Authorization"] == nil ? HTTPResponse(status: .unauthorized) : try await next(request, context)
            }
        }
        let router = Router()
        router.group("/private").add(middleware: Deny()).get("/x", use: text("secret"))
        let table = router.makeTable()
        let denied = try await run(table, .get, "/private/x")
        XCTAssertEqual(denied.status, .unauthorized)
        let allowed = try await run(table, .get, "/private/x", headers: ["Authorization": "yes"])
        XCTAssertEqual(allowed.bodyBytes, Array("secret".utf8))
    }

    func testPatternsAreCanonical() {
        XCTAssertEqual(RoutePattern.join("/parse/", "/users/:id/"), "/parse/users/:id")
        XCTAssertEqual(RoutePattern.join("", "/"), "/")
        XCTAssertEqual(RoutePattern.join("parse", ""), "/parse")
        let router = Router()
        router.get("/", use: text("root"))
        XCTAssertEqual(matched(router.makeTable(), .get, "/")?.pattern, "/")
        XCTAssertEqual(matched(router.makeTable(), .get, "")?.pattern, "/")
    }

    // MARK: - Helpers

    /// Adds its name to the request's `X-Tag` list and the response's `X-Trail` list.
    struct Tag: HTTPMiddleware {
        let name: String
        init(_ name: String) { self.name = name }

        func handle(_ request: HTTPRequest, context: RequestContext, next: (HTTPRequest, RequestContext) async throws -> HTTPResponse) async throws -> HTTPResponse {
            var request = request
            request.head.headers.add("X-Tag", name)
            var response = try await next(request, context)
            response.headers.add("X-Trail", name)
            return response
        }
    }

    private func run(_ table: RouteTable, _ method: HTTPMethod, _ path: String, headers: HTTPHeaders = HTTPHeaders()) async throws -> HTTPResponse {
        guard case .found(let route, let parameters) = table.match(method, path: path) else {
            XCTFail("no route for \(method) \(path)")
            return HTTPResponse(status: .notFound)
        }
        let request = HTTPRequest(head: try HTTPRequestHead(method: method, target: path, headers: headers), parameters: parameters)
        let context = RequestContext(parameters: parameters, route: route.pattern, loop: try Self.loop())
        switch route.handler {
        case .inline(let handler): return handler(request, context)
        case .async(let handler): return try await handler(request, context)
        case .inlineFirst(let attempt, let handler):
            // The attempts here answer at once or decline.
            let answered = Mutex<HTTPResponse?>(nil)
            if attempt(request, HTTPResponder { response in answered.withLock { $0 = response } }),
               let response = answered.withLock({ $0 }) {
                return response
            }
            return try await handler(request, context)
        case .upgrade: return HTTPResponse(status: .switchingProtocols)
        }
    }

    /// A loop that is never run: handlers here only read it from the context.
    private static func loop() throws -> EventLoop {
        try EventLoop(index: 0)
    }
}
