import Foundation
import ParleyNet
import ParleyTestSupport
import Synchronization
import XCTest
@testable import ParleyHTTP

/// Records what the server reports to its observer.
final class RecordingObserver: HTTPServerObserver {
    struct Record: Equatable {
        var method: HTTPMethod?
        var route: String?
        var status: Int
    }

    let records = Mutex<[Record]>([])

    func requestCompleted(method: HTTPMethod?, route: String?, status: HTTPStatus, duration: Duration) {
        precondition(duration >= .zero)
        records.withLock { $0.append(Record(method: method, route: route, status: status.code)) }
    }
}

/// Echoes raw bytes: what an upgraded connection is handed to in the upgrade test.
final class RawEchoHandler: ConnectionHandler {
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        connection.write(Array("echo:".utf8) + Array(bytes))
    }

    func connectionDidClose(_ connection: Connection) {}
}

final class HTTPServerTests: XCTestCase {
    private var group: EventLoopGroup!
    private var servers: [HTTPServer] = []
    private let observer = RecordingObserver()

    override func setUpWithError() throws {
        group = try EventLoopGroup(threads: 2)
    }

    override func tearDown() {
        for server in servers { server.closeAll() }
        servers = []
        group.shutdownGracefully()
        group = nil
    }

    static let healthResponse = HTTPResponse(headers: ["Content-Type": "text/plain"], body: "ok")
    static let fixedResponse = HTTPResponse(headers: ["Date": "yesterday", "Content-Length": "7", "X-Fixed": "1"])
    static let closingResponse = HTTPResponse(headers: ["Connection": "close"], body: "bye")
    /// How many `/slow` requests reached their handler (a test waits for its own instead of sleeping).
    static let slowRequestsStarted = Atomic<Int>(0)

    private func makeRouter() -> Router {
        let router = Router()
        router.inline(.get, "/health") { _, _ in Self.healthResponse }
        router.get("/seq/:n") { _, context in
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
            XCTAssertTrue(context.loop.inEventLoop, "async handlers run on the connection's loop")
            return HTTPResponse(body: context.parameters["n"] ?? "?")
        }
        router.post("/echo") { request, _ in
            HTTPResponse(headers: ["X-Path": request.path], body: request.body)
        }
        router.get("/text") { _, _ in HTTPResponse(body: "hello, world") }
        router.inline(.get, "/fixed") { _, _ in Self.fixedResponse }
        router.inline(.get, "/bye") { _, _ in Self.closingResponse }
        router.inline(.get, "/only-get") { _, _ in HTTPResponse(body: "get") }
        router.put("/only-get") { _, _ in HTTPResponse(body: "put") }
        router.get("/slow") { _, _ in
            HTTPServerTests.slowRequestsStarted.add(1, ordering: .relaxed)
            // The slow handler itself: 300 ms of work that a quiescing server lets finish.
            try await Task.sleep(for: .milliseconds(300))
            return HTTPResponse(body: "slow")
        }
        router.get("/fail") { _, _ in throw CancellationError() }
        router.get("/teapot") { _, _ in throw HTTPError(.init(418), message: "short and stout") }
        router.upgrade("/raw") { request, _, _ in
            guard request.headers["Upgrade"] == "raw-echo" else { return .reject(.plain(.badRequest)) }
            return .accept(HTTPResponse(status: .switchingProtocols, headers: ["Connection": "Upgrade", "Upgrade": "raw-echo"]), RawEchoHandler())
        }
        return router
    }

    private func startServer(_ configure: (inout HTTPServer.Configuration) -> Void = { _ in }) throws -> HTTPServer {
        var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        configure(&configuration)
        let server = HTTPServer(group: group, configuration: configuration, router: makeRouter(), observer: observer)
        try server.start()
        servers.append(server)
        return server
    }

    // MARK: - Keep-alive, pipelining, bodies

    func testKeepAliveServesManyRequestsOnOneConnection() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        for index in 0..<20 {
            try client.send("GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            let response = try client.readResponse()
            XCTAssertEqual(response.status, 200, "request \(index)")
            XCTAssertEqual(response.text, "ok")
            XCTAssertEqual(response.header("Content-Length"), "2")
            XCTAssertEqual(response.header("Connection"), "keep-alive")
            XCTAssertEqual(response.header("Content-Type"), "text/plain")
            XCTAssertTrue(response.header("Date")?.hasSuffix(" GMT") ?? false, "\(response)")
        }
        try client.send("GET /seq/7 HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "7")
        // HTTP/1.0 without keep-alive: answered, then closed.
        try client.send("GET /health HTTP/1.0\r\n\r\n")
        let last = try client.readResponse()
        XCTAssertEqual(last.header("Connection"), "close")
        XCTAssertTrue(client.readsEOF())
    }

    func testResponsesSharingStaticFieldsAreWrittenLikeOthers() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        // Static fields come again and again (written from the loop's cache after the second
        // time), mixed with fields made per response, other static fields and HEAD requests.
        let paths = ["/health", "/health", "/health", "/fixed", "/health", "/text", "/fixed", "/fixed", "/fixed", "/health", "/fixed"]
        for (index, path) in paths.enumerated() {
            let headRequest = index % 4 == 3
            try client.send("\(headRequest ? "HEAD" : "GET") \(path) HTTP/1.1\r\n\r\n")
            let response = try client.readResponse(headRequest: headRequest)
            XCTAssertEqual(response.status, 200, "\(index) \(path)")
            switch path {
            case "/health":
                XCTAssertEqual(response.headers.map(\.name), ["Date", "Content-Length", "Connection", "Content-Type"], "\(index)")
                XCTAssertEqual(response.header("Content-Type"), "text/plain")
                XCTAssertEqual(response.header("Content-Length"), "2")
                XCTAssertEqual(response.text, headRequest ? "" : "ok")
            case "/fixed":
                XCTAssertEqual(response.headers.map(\.name), ["Content-Length", "Connection", "Date", "X-Fixed"], "\(index)")
                XCTAssertEqual(response.header("Date"), "yesterday")
                XCTAssertEqual(response.header("Content-Length"), headRequest ? "7" : "0", "\(index)")
            default:
                XCTAssertEqual(response.headers.map(\.name), ["Date", "Content-Length", "Connection"], "\(index)")
                XCTAssertEqual(response.text, headRequest ? "" : "hello, world")
            }
        }
    }

    func testStaticFieldsAskingToCloseCloseEveryConnection() throws {
        let server = try startServer()
        // Six connections over two loops: one loop sees the same fields at least three times
        // (written directly, then cached, then from the cache).
        for index in 0..<6 {
            let client = try HTTPTestClient(port: server.port)
            try client.send("GET /bye HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
            let response = try client.readResponse()
            XCTAssertEqual(response.text, "bye", "\(index)")
            XCTAssertEqual(response.header("Connection"), "close", "\(index)")
            XCTAssertTrue(client.readsEOF(), "\(index)")
        }
    }

    func testHundredPipelinedRequestsInOneWriteAreAnsweredInOrder() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        var batch = ""
        for index in 0..<100 {
            batch += index % 3 == 0 ? "GET /health HTTP/1.1\r\n\r\n" : "GET /seq/\(index) HTTP/1.1\r\nHost: x\r\n\r\n"
        }
        try client.send(batch)
        for index in 0..<100 {
            let response = try client.readResponse()
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(response.text, index % 3 == 0 ? "ok" : "\(index)", "response \(index) out of order")
        }
        // The connection is still usable after the burst.
        try client.send("POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nend")
        XCTAssertEqual(try client.readResponse().text, "end")
    }

    func testPipelinedRequestsBeforeHalfCloseAreAllAnswered() throws {
        let server = try startServer { $0.maxPipelinedRequests = 4 }
        let client = try HTTPTestClient(port: server.port)
        try client.send(String(repeating: "GET /seq/1 HTTP/1.1\r\n\r\n", count: 30))
        client.shutdownWrite()
        for _ in 0..<30 { XCTAssertEqual(try client.readResponse().text, "1") }
        XCTAssertTrue(client.readsEOF())
    }

    func testChunkedUploadIsEchoed() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        var expected = ""
        for index in 0..<20 {
            let piece = String(repeating: Character(UnicodeScalar(UInt8(65 + index))), count: index * 37 + 1)
            expected += piece
            try client.send(String(piece.utf8.count, radix: 16) + (index % 2 == 0 ? ";ext=\(index)" : "") + "\r\n" + piece + "\r\n")
            if index % 5 == 0 { usleep(20_000) }
        }
        try client.send("0\r\nX-Trailer: ignored\r\n\r\n")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, expected)
        XCTAssertNil(response.header("X-Trailer"))
    }

    func testHeadHasContentLengthAndNoBody() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("HEAD /text HTTP/1.1\r\n\r\nGET /text HTTP/1.1\r\n\r\n")
        let head = try client.readResponse(headRequest: true)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "12")
        XCTAssertTrue(head.body.isEmpty)
        // If HEAD had sent a body, it would be read here instead of the GET's status line.
        let get = try client.readResponse()
        XCTAssertEqual(get.text, "hello, world")
    }

    // MARK: - Expect: 100-continue

    func testExpectContinue() throws {
        let server = try startServer { $0.limits.maxBodyBytes = 1000 }
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        let interim = try client.readResponse()
        XCTAssertEqual(interim.status, 100)
        try client.send("hello")
        let final = try client.readResponse()
        XCTAssertEqual(final.status, 200)
        XCTAssertEqual(final.text, "hello")

        // A client that does not wait for 100 gets no 100 after its body is in.
        try client.send("POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi")
        let response = try client.readResponse()
        XCTAssertTrue(response.status == 100 || response.status == 200)
        if response.status == 100 { XCTAssertEqual(try client.readResponse().text, "hi") }

        // Over the limit: 413 at once, no 100, then close.
        let tooBig = try HTTPTestClient(port: server.port)
        try tooBig.send("POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1001\r\n\r\n")
        let rejected = try tooBig.readResponse()
        XCTAssertEqual(rejected.status, 413)
        XCTAssertEqual(rejected.header("Connection"), "close")
        XCTAssertTrue(tooBig.readsEOF())

        // No route: 404 at once without reading the body, then close.
        let lost = try HTTPTestClient(port: server.port)
        try lost.send("PUT /nowhere HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
        let notFound = try lost.readResponse()
        XCTAssertEqual(notFound.status, 404)
        XCTAssertEqual(notFound.header("Connection"), "close")
        XCTAssertTrue(lost.readsEOF())
    }

    // MARK: - Limits

    func testBodyOverLimitGets413AndClose() throws {
        let server = try startServer { $0.limits.maxBodyBytes = 1024 }
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /echo HTTP/1.1\r\nContent-Length: 1025\r\n\r\n")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 413)
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(client.readsEOF())

        let chunked = try HTTPTestClient(port: server.port)
        try chunked.send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n" + String(repeating: "a", count: 512) + "\r\n201\r\n")
        XCTAssertEqual(try chunked.readResponse().status, 413)
        XCTAssertTrue(chunked.readsEOF())

        let fine = try HTTPTestClient(port: server.port)
        try fine.send("POST /echo HTTP/1.1\r\nContent-Length: 1024\r\n\r\n" + String(repeating: "b", count: 1024))
        XCTAssertEqual(try fine.readResponse().body.count, 1024)
    }

    func testHeadOverLimitGets431AndClose() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /health HTTP/1.1\r\nX-Big: " + String(repeating: "h", count: 16 * 1024) + "\r\n\r\n")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 431)
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(client.readsEOF())

        let many = try HTTPTestClient(port: server.port)
        try many.send("GET /health HTTP/1.1\r\n" + (0...100).map { "H\($0): v\r\n" }.joined() + "\r\n")
        XCTAssertEqual(try many.readResponse().status, 431)
        XCTAssertTrue(many.readsEOF())
    }

    // MARK: - Slow clients

    func testSlowlorisIsCutOffByTheHeaderDeadlineWhileOthersAreServed() throws {
        let server = try startServer { $0.headerTimeout = .seconds(2) }
        let dripper = try HTTPTestClient(port: server.port)
        let closedAfter = Mutex<Double?>(nil)
        let dripping = Thread {
            let start = Date()
            let head = Array("GET /health HTTP/1.1\r\nX-Slow: " + String(repeating: "z", count: 40) + "\r\n\r\n")
            dripper.setTimeout(seconds: 0, microseconds: 1000)
            for character in head {
                if (try? dripper.send(String(character))) == nil { break }
                if dripper.closedWithin(seconds: 1.0) {
                    closedAfter.withLock { $0 = Date().timeIntervalSince(start) }
                    return
                }
            }
        }
        dripping.start()
        // Meanwhile another client keeps getting answers.
        let other = try HTTPTestClient(port: server.port)
        var answered = 0
        let start = Date()
        while Date().timeIntervalSince(start) < 4.5 {
            try other.send("GET /health HTTP/1.1\r\n\r\n")
            XCTAssertEqual(try other.readResponse().text, "ok")
            answered += 1
            usleep(100_000)
        }
        while dripping.isExecuting { usleep(50_000) }
        let seconds = try XCTUnwrap(closedAfter.withLock { $0 }, "the dripping client was never closed")
        XCTAssertGreaterThanOrEqual(seconds, 1.9)
        XCTAssertLessThan(seconds, 3.5)
        XCTAssertGreaterThan(answered, 30)
    }

    func testIdleKeepAliveConnectionIsClosed() throws {
        let server = try startServer { $0.idleTimeout = .seconds(1) }
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().status, 200)
        let start = Date()
        XCTAssertTrue(client.closedWithin(seconds: 3))
        XCTAssertGreaterThan(Date().timeIntervalSince(start), 0.8)
    }

    func testSlowBodyIsCutOffByTheBodyDeadline() throws {
        let server = try startServer { $0.bodyTimeout = .seconds(1) }
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly a part")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 408)
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(client.readsEOF())
    }

    // MARK: - Many connections

    func testThousandConcurrentConnections() throws {
        raiseOpenFileLimit(to: 4096)
        let server = try startServer()
        var clients: [HTTPTestClient] = []
        for _ in 0..<1000 { clients.append(try HTTPTestClient(port: server.port)) }
        for (index, client) in clients.enumerated() {
            try client.send(index % 2 == 0 ? "GET /health HTTP/1.1\r\n\r\n" : "GET /seq/\(index) HTTP/1.1\r\n\r\n")
        }
        for (index, client) in clients.enumerated() {
            XCTAssertEqual(try client.readResponse().text, index % 2 == 0 ? "ok" : "\(index)")
        }
        XCTAssertEqual(server.openConnections(), 1000)
        clients.removeAll()
        let deadline = Date().addingTimeInterval(5)
        while server.openConnections() > 0 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.openConnections(), 0)
    }

    func testMaxConnectionsClosesTheExtraOnes() throws {
        let server = try startServer { $0.maxConnections = 2 }
        let first = try HTTPTestClient(port: server.port)
        let second = try HTTPTestClient(port: server.port)
        try first.send("GET /health HTTP/1.1\r\n\r\n")
        try second.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try first.readResponse().status, 200)
        XCTAssertEqual(try second.readResponse().status, 200)
        let third = try HTTPTestClient(port: server.port)
        XCTAssertTrue(third.readsEOF())
    }

    // MARK: - Bad input

    func testSmugglingShapesGet400AndCloseAndTheServerKeepsServing() throws {
        let server = try startServer()
        let shapes: [(String, Int)] = [
            ("POST /echo HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\n\r\n", 400),
            ("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", 400),
            ("POST /echo HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400),
            ("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4x\r\nabcd\r\n0\r\n\r\n", 400),
            ("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcdXX0\r\n\r\n", 400),
            ("GET /health HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n", 400),
            ("GET /health HTTP/1.1\r\nX-A: a\rX-B: b\r\n\r\n", 400),
            ("GET /health HTTP/1.1\nHost: x\n\n", 400),
            ("GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
            ("GET /health HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            ("G@T /health HTTP/1.1\r\n\r\n", 400),
            ("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400),
            ("POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            ("GET /health HTTP/2.0\r\n\r\n", 505),
            ("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}", 400),
        ]
        for (request, status) in shapes {
            let client = try HTTPTestClient(port: server.port)
            try client.send(request)
            let response = try client.readResponse()
            XCTAssertEqual(response.status, status, request.debugDescription)
            XCTAssertEqual(response.header("Connection"), "close", request.debugDescription)
            XCTAssertTrue(client.readsEOF(), "not closed after \(request.debugDescription)")
            let next = try HTTPTestClient(port: server.port)
            try next.send("GET /health HTTP/1.1\r\n\r\n")
            XCTAssertEqual(try next.readResponse().text, "ok")
        }
    }

    func testBadRequestAfterGoodOnesIsAnsweredInOrder() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /seq/1 HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nA\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().text, "1")
        XCTAssertEqual(try client.readResponse().text, "ok")
        let bad = try client.readResponse()
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.header("Connection"), "close")
        XCTAssertTrue(client.readsEOF())
    }

    // MARK: - Routing over the socket

    func testNotFoundAndMethodNotAllowedWithAllow() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("POST /only-get HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        let response = try client.readResponse()
        XCTAssertEqual(response.status, 405)
        XCTAssertEqual(response.header("Allow"), "GET, HEAD, PUT")
        try client.send("GET /missing HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().status, 404)
        try client.send("BREW /pot HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().status, 501)
        XCTAssertTrue(client.readsEOF())
    }

    func testHandlerErrors() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /fail HTTP/1.1\r\n\r\nGET /teapot HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try client.readResponse().status, 500)
        let teapot = try client.readResponse()
        XCTAssertEqual(teapot.status, 418)
        XCTAssertEqual(teapot.text, "short and stout\n")
        XCTAssertEqual(try client.readResponse().text, "ok")
    }

    func testObserverSeesRouteStatusAndMethod() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /seq/5 HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        for _ in 0..<3 { _ = try client.readResponse() }
        XCTAssertTrue(client.readsEOF())
        let expected = [
            RecordingObserver.Record(method: .get, route: "/seq/:n", status: 200),
            RecordingObserver.Record(method: .get, route: nil, status: 404),
            RecordingObserver.Record(method: .get, route: "/health", status: 200),
        ]
        let deadline = Date().addingTimeInterval(2)
        while observer.records.withLock({ $0.count }) < 3 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(observer.records.withLock { $0 }, expected)
    }

    // MARK: - Upgrade and shutdown

    func testUpgradeHandsTheConnectionOver() throws {
        let server = try startServer()
        let client = try HTTPTestClient(port: server.port)
        try client.send("GET /health HTTP/1.1\r\n\r\nGET /raw HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: raw-echo\r\n\r\nfirst")
        XCTAssertEqual(try client.readResponse().text, "ok")
        let switched = try client.readResponse()
        XCTAssertEqual(switched.status, 101)
        XCTAssertEqual(switched.header("Upgrade"), "raw-echo")
        XCTAssertNil(switched.header("Content-Length"))
        XCTAssertEqual(String(decoding: try client.readBytes(10), as: UTF8.self), "echo:first")
        try client.send("again")
        let received = try client.readBytes(10)
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "echo:again")

        // A plain GET to the upgrade route gets 426; a refused upgrade is answered and closed.
        let plain = try HTTPTestClient(port: server.port)
        try plain.send("GET /raw HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try plain.readResponse().status, 426)
        let refused = try HTTPTestClient(port: server.port)
        try refused.send("GET /raw HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: other\r\n\r\n")
        XCTAssertEqual(try refused.readResponse().status, 400)
        XCTAssertTrue(refused.readsEOF())
        // Upgrade asked on a normal route: answered normally, then closed.
        let ignored = try HTTPTestClient(port: server.port)
        try ignored.send("GET /health HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
        let answer = try ignored.readResponse()
        XCTAssertEqual(answer.text, "ok")
        XCTAssertEqual(answer.header("Connection"), "close")
        XCTAssertTrue(ignored.readsEOF())
    }

    func testQuiesceFinishesInFlightRequestsAndClosesIdleConnections() throws {
        let server = try startServer()
        let idle = try HTTPTestClient(port: server.port)
        try idle.send("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(try idle.readResponse().status, 200)
        let busy = try HTTPTestClient(port: server.port)
        let started = Self.slowRequestsStarted.load(ordering: .relaxed)
        try busy.send("GET /slow HTTP/1.1\r\n\r\n")
        XCTAssertTrue(WaitUntil.holds { Self.slowRequestsStarted.load(ordering: .relaxed) > started }, "the slow request reached its handler")
        server.quiesce()
        XCTAssertTrue(idle.closedWithin(seconds: 2))
        let response = try busy.readResponse()
        XCTAssertEqual(response.text, "slow")
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(busy.readsEOF())
        XCTAssertThrowsError(try HTTPTestClient(port: server.port).send("GET /health HTTP/1.1\r\n\r\n"), "no longer accepting") { _ in }
    }
}
