import Foundation
import ParleyNet
import Synchronization
import XCTest
@testable import ParleyHTTP

/// `Router.on(_:_:inline:else:)`: the inline answer (at once or later, from the loop) skips
/// middleware and tasks, a declined request falls back to the async handler through the
/// middleware, and pipelined answers keep request order.
final class InlineFirstRouteTests: XCTestCase {
    private var group: EventLoopGroup!
    private var server: HTTPServer!

    /// Adds `X-Middleware: ran` to every response it wraps.
    struct Stamp: HTTPMiddleware {
        func handle(_ request: HTTPRequest, context: RequestContext, next: (HTTPRequest, RequestContext) async throws -> HTTPResponse) async throws -> HTTPResponse {
            var response = try await next(request, context)
            response.headers.add("X-Middleware", "ran")
            return response
        }
    }

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 1)
        let router = Router()
        router.add(middleware: Stamp())
        router.on(.get, "/me", inline: { request, respond in
            switch request.headers["X-Fast"] {
            case nil:
                return false
            case "later"?:
                // Answered from a later loop turn, as a database completion would be.
                EventLoop.current?.schedule(after: .milliseconds(10)) { respond(HTTPResponse(body: "later")) }
                return true
            default:
                respond(HTTPResponse(body: "inline"))
                return true
            }
        }, else: { _, context in
            try await Task.sleep(for: .milliseconds(5))
            return HTTPResponse(body: "async \(context.route ?? "?")")
        })
        server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0), router: router)
        try server.start()
    }

    override func tearDown() {
        server.closeAll()
        group.shutdownGracefully()
        group = nil
    }

    private func exchange(_ requests: String) throws -> String {
        let client = try HTTPTestClient(port: server.port, timeoutSeconds: 5)
        try client.send(requests)
        return client.readUntilClosed()
    }

    func testInlineAnswerSkipsMiddlewareAndFallbackRunsThroughIt() throws {
        let fast = try exchange("GET /me HTTP/1.1\r\nX-Fast: 1\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(fast.hasSuffix("\r\n\r\ninline"), fast)
        XCTAssertFalse(fast.contains("X-Middleware"), fast)
        let slow = try exchange("GET /me HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(slow.hasSuffix("\r\n\r\nasync /me"), slow)
        XCTAssertTrue(slow.contains("X-Middleware: ran\r\n"), slow)
    }

    func testPipelinedInlineAnswersWaitForEarlierFallbacks() throws {
        let all = try exchange(
            "GET /me HTTP/1.1\r\n\r\nGET /me HTTP/1.1\r\nX-Fast: 1\r\n\r\nGET /me HTTP/1.1\r\n\r\nGET /me HTTP/1.1\r\nX-Fast: 1\r\nConnection: close\r\n\r\n")
        let bodies = all.components(separatedBy: "HTTP/1.1 200 OK").dropFirst().map { $0.components(separatedBy: "\r\n\r\n").last ?? "" }
        XCTAssertEqual(bodies, ["async /me", "inline", "async /me", "inline"])
    }

    func testLaterAnswerKeepsItsPlaceInThePipeline() throws {
        let all = try exchange(
            "GET /me HTTP/1.1\r\nX-Fast: later\r\n\r\nGET /me HTTP/1.1\r\nX-Fast: 1\r\n\r\nGET /me HTTP/1.1\r\nX-Fast: later\r\nConnection: close\r\n\r\n")
        let bodies = all.components(separatedBy: "HTTP/1.1 200 OK").dropFirst().map { $0.components(separatedBy: "\r\n\r\n").last ?? "" }
        XCTAssertEqual(bodies, ["later", "inline", "later"])
        XCTAssertFalse(all.contains("X-Middleware"), all)
    }

    func testHeadFallsBackToTheGetRoute() async throws {
        let router = Router()
        router.on(.get, "/x", inline: { _, respond in respond(HTTPResponse(body: "inline")); return true }, else: { _, _ in HTTPResponse(body: "async") })
        guard case .found(let route, _) = router.makeTable().match(.head, path: "/x"), case .inlineFirst(let attempt, let handler) = route.handler else {
            return XCTFail("HEAD /x should find the inline-first GET route")
        }
        let request = HTTPRequest(head: try HTTPRequestHead(method: .head, target: "/x"))
        let answered = Mutex<HTTPResponse?>(nil)
        XCTAssertTrue(attempt(request, HTTPResponder { response in answered.withLock { $0 = response } }))
        XCTAssertEqual(answered.withLock { $0?.bodyBytes }, Array("inline".utf8))
        let response = try await handler(request, RequestContext(loop: try EventLoop(index: 0)))
        XCTAssertEqual(response.bodyBytes, Array("async".utf8))
    }
}
