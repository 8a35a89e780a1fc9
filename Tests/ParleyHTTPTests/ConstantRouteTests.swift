import Foundation
import ParleyNet
import Synchronization
import XCTest
@testable import ParleyHTTP

/// `Router.constant` must answer byte for byte like an inline route returning the same response.
final class ConstantRouteTests: XCTestCase {
    private var group: EventLoopGroup!
    private var server: HTTPServer!
    private let observer = RecordingObserver()

    static let response = HTTPResponse(headers: ["Content-Type": "application/json", "X-Extra": "1"], body: #"{"status":"ok"}"#)

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 1)
        let router = Router()
        router.constant(.get, "/constant", response: Self.response)
        router.inline(.get, "/inline") { _, _ in Self.response }
        router.constant(.get, "/closing", response: HTTPResponse(headers: ["Connection": "close"], body: "bye"))
        router.constant(.get, "/empty", response: HTTPResponse(status: .noContent))
        router.get("/seq/:n") { _, context in
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
            return HTTPResponse(body: context.parameters["n"] ?? "?")
        }
        server = HTTPServer(group: group, configuration: .init(host: "127.0.0.1", port: 0), router: router, observer: observer)
        try server.start()
    }

    override func tearDown() {
        server.closeAll()
        group.shutdownGracefully()
        group = nil
    }

    /// Everything the server sends on a fresh connection for `requests`, until it closes.
    private func exchange(_ requests: String) throws -> String {
        let client = try HTTPTestClient(port: server.port, timeoutSeconds: 5)
        try client.send(requests)
        // The Date line may tick between two exchanges; everything else must match.
        return client.readUntilClosed()
            .components(separatedBy: "\r\n").filter { !$0.hasPrefix("Date: ") }.joined(separator: "\r\n")
    }

    func testConstantRouteAnswersLikeTheInlineRoute() throws {
        let shapes = [
            "GET {} HTTP/1.1\r\nHost: a\r\n\r\nHEAD {} HTTP/1.1\r\n\r\nGET {} HTTP/1.1\r\nConnection: close\r\n\r\n",
            "GET {} HTTP/1.0\r\n\r\n",
            "GET {} HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD {} HTTP/1.0\r\n\r\n",
            "GET /seq/1 HTTP/1.1\r\n\r\nGET {} HTTP/1.1\r\n\r\nGET /seq/2 HTTP/1.1\r\n\r\nGET {} HTTP/1.1\r\nConnection: close\r\n\r\n",
            "POST {} HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ]
        for shape in shapes {
            let constant = try exchange(shape.replacingOccurrences(of: "{}", with: "/constant"))
            let inline = try exchange(shape.replacingOccurrences(of: "{}", with: "/inline"))
            XCTAssertEqual(constant, inline, shape.debugDescription)
            XCTAssertTrue(constant.hasPrefix("HTTP/1.1 "), constant)
        }
    }

    func testConstantRouteKeepsItsOwnConnectionCloseAndBodilessStatus() throws {
        let closing = try exchange("GET /closing HTTP/1.1\r\n\r\nGET /constant HTTP/1.1\r\n\r\n")
        XCTAssertEqual(closing, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye")
        let empty = try exchange("GET /empty HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(empty, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    }

    func testObserverSeesTheConstantRoute() throws {
        _ = try exchange("GET /constant HTTP/1.1\r\nConnection: close\r\n\r\n")
        let deadline = Date().addingTimeInterval(2)
        while observer.records.withLock({ $0.isEmpty }) && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(observer.records.withLock { $0 }, [RecordingObserver.Record(method: .get, route: "/constant", status: 200)])
    }
}
