import Foundation
import ParleyHTTP
import ParleyNet
import Synchronization
import XCTest

/// HTTPClient against a scripted server over real loopback sockets.
final class HTTPClientTests: XCTestCase {
    private var group: EventLoopGroup!

    override func setUpWithError() throws {
        // One loop: the test's tasks are not on a loop, so with several each request would go to
        // the next loop's pool and keep-alive could not be observed.
        group = try EventLoopGroup(threads: 1)
    }

    override func tearDown() {
        group.shutdownGracefully()
    }

    private func url(_ server: ScriptedHTTPServer, _ path: String = "/") -> HTTPClientURL {
        HTTPClientURL("http://127.0.0.1:\(server.port)\(path)")!
    }

    private func expectFailure(_ expected: HTTPClientError, file: StaticString = #filePath, line: UInt = #line,
                               _ body: () async throws(HTTPClientError) -> HTTPClientResponse) async {
        do {
            let response = try await body()
            XCTFail("expected \(expected), got \(response.status)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testPostRoundTripSendsFramingHeaders() async throws {
        let server = try ScriptedHTTPServer { request in
            .bytes(ScriptedHTTPServer.response(headers: [("Content-Type", "text/plain")], body: "got \(request.text)"), close: false)
        }
        let client = HTTPClient(group: group)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        let response = try await client.execute(HTTPClientRequest(method: .post, url: url(server, "/api/push?x=1"), headers: headers,
                                                                  body: Array("{\"a\":1}".utf8)))
        XCTAssertEqual(response.status, .ok)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "got {\"a\":1}")
        XCTAssertEqual(response.headers["content-type"], "text/plain")
        let seen = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(seen.method, "POST")
        XCTAssertEqual(seen.target, "/api/push?x=1")
        XCTAssertEqual(seen.header("host"), "127.0.0.1:\(server.port)")
        XCTAssertEqual(seen.header("content-length"), "7")
        XCTAssertEqual(seen.header("content-type"), "application/json")
    }

    func testKeepAliveReusesOneConnection() async throws {
        let server = try ScriptedHTTPServer { request in
            .bytes(ScriptedHTTPServer.response(body: request.target), close: false)
        }
        let client = HTTPClient(group: group)
        for i in 0..<20 {
            let response = try await client.execute(HTTPClientRequest(url: url(server, "/n\(i)")))
            XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "/n\(i)")
        }
        XCTAssertEqual(server.acceptedConnections, 1)
        XCTAssertEqual(Set(server.requests.map(\.connection)), [1])
        let idle = await client.idleConnectionCount()
        XCTAssertEqual(idle, 1)
    }

    func testConnectionCloseAndHTTP10AreNotReused() async throws {
        let server = try ScriptedHTTPServer { request in
            if request.target == "/close" {
                return .bytes(ScriptedHTTPServer.response(headers: [("Connection", "close")], body: "bye"), close: true)
            }
            return .bytes(Array("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8), close: false)
        }
        let client = HTTPClient(group: group)
        _ = try await client.execute(HTTPClientRequest(url: url(server, "/close")))
        _ = try await client.execute(HTTPClientRequest(url: url(server, "/close")))
        _ = try await client.execute(HTTPClientRequest(url: url(server, "/old")))
        _ = try await client.execute(HTTPClientRequest(url: url(server, "/old")))
        XCTAssertEqual(server.acceptedConnections, 4)
    }

    func testChunkedAndUntilCloseBodies() async throws {
        let server = try ScriptedHTTPServer { request in
            if request.target == "/chunked" {
                return .split(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n".utf8), .milliseconds(50),
                              Array("3\r\nefg\r\n0\r\n\r\n".utf8))
            }
            return .bytes(Array("HTTP/1.1 200 OK\r\n\r\nuntil close".utf8), close: true)
        }
        let client = HTTPClient(group: group)
        let chunked = try await client.execute(HTTPClientRequest(url: url(server, "/chunked")))
        XCTAssertEqual(String(decoding: chunked.body, as: UTF8.self), "abcdefg")
        let second = try await client.execute(HTTPClientRequest(url: url(server, "/chunked")))
        XCTAssertEqual(second.body.count, 7)
        XCTAssertEqual(server.acceptedConnections, 1, "a chunked response keeps the connection")
        let untilClose = try await client.execute(HTTPClientRequest(url: url(server, "/eof")))
        XCTAssertEqual(String(decoding: untilClose.body, as: UTF8.self), "until close")
    }

    func testTimeoutWhenTheServerIsSilentOrSlow() async throws {
        let server = try ScriptedHTTPServer { request in
            switch request.target {
            case "/silent": return .silence
            case "/slow-body": return .split(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8), .seconds(3), Array("defghij".utf8))
            default: return .bytes(ScriptedHTTPServer.response(body: "fine"), close: false)
            }
        }
        let client = HTTPClient(group: group)
        let started = ContinuousClock.now
        await expectFailure(.timedOut) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: url(server, "/silent")), timeout: .milliseconds(300))
        }
        let elapsed = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(290))
        XCTAssertLessThan(elapsed, .seconds(2))
        await expectFailure(.timedOut) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: url(server, "/slow-body")), timeout: .milliseconds(300))
        }
        // The abandoned connections are closed, a new request gets a fresh one and works.
        let fine = try await client.execute(HTTPClientRequest(url: url(server, "/fine")))
        XCTAssertEqual(String(decoding: fine.body, as: UTF8.self), "fine")
        XCTAssertEqual(server.acceptedConnections, 3)
    }

    func testResponsesAreBounded() async throws {
        let big = String(repeating: "x", count: 5000)
        let server = try ScriptedHTTPServer { request in
            switch request.target {
            case "/declared": return .bytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n".utf8), close: false)
            case "/chunked": return .bytes(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n\(big)\r\n0\r\n\r\n".utf8), close: false)
            case "/head": return .bytes(Array("HTTP/1.1 200 OK\r\nX: \(big)\r\nContent-Length: 0\r\n\r\n".utf8), close: false)
            default: return .bytes(Array("HTTP/1.1 200 OK\r\n\r\n\(big)".utf8), close: true)
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.responseLimits.maxBodyBytes = 4096
        configuration.responseLimits.maxHeadBytes = 1024
        let client = HTTPClient(group: group, configuration: configuration)
        for (path, error) in [("/declared", HTTPResponseParserError.bodyTooLarge), ("/chunked", .bodyTooLarge), ("/eof", .bodyTooLarge),
                              ("/head", .headTooLarge)] {
            await expectFailure(.invalidResponse(error)) { () async throws(HTTPClientError) in
                try await client.execute(HTTPClientRequest(url: url(server, path)))
            }
        }
    }

    func testMalformedResponseFailsTheRequest() async throws {
        let server = try ScriptedHTTPServer { _ in .bytes(Array("HTTP/1.1 OK\r\n\r\n".utf8), close: false) }
        let client = HTTPClient(group: group)
        await expectFailure(.invalidResponse(.invalidStatusLine)) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: url(server)))
        }
    }

    func testConnectRefusedAndUnresolvableHost() async throws {
        let client = HTTPClient(group: group)
        let port = FreeLoopbackPort.next()
        do {
            _ = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://127.0.0.1:\(port)/")!))
            XCTFail("connected to a closed port")
        } catch {
            guard case .connectFailed(.system(_, let code)) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, ECONNREFUSED)
        }
        await expectFailure(.unresolvedHost("gateway.invalid")) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://gateway.invalid/")!))
        }
    }

    func testHostNamesResolveOnTheBlockingPool() async throws {
        let server = try ScriptedHTTPServer { _ in .bytes(ScriptedHTTPServer.response(body: "named"), close: false) }
        let pool = try BlockingPool(threads: 1)
        defer { pool.shutdown() }
        let client = HTTPClient(group: group, blockingPool: pool)
        let response = try await client.execute(HTTPClientRequest(url: HTTPClientURL("http://localhost:\(server.port)/")!))
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "named")
        XCTAssertEqual(try TCPClient.resolve(host: "localhost", port: 80).count, 1)
        XCTAssertThrowsError(try TCPClient.resolve(host: "no-such-host.invalid", port: 80))
    }

    func testStaleKeptAliveConnectionIsRetriedOnce() async throws {
        let count = Atomic<Int>(0)
        let server = try ScriptedHTTPServer { _ in
            // The second request arrives on a connection the server is done with: it hangs up.
            count.add(1, ordering: .relaxed).newValue == 2 ? .hangUp : .bytes(ScriptedHTTPServer.response(body: "ok"), close: false)
        }
        let client = HTTPClient(group: group)
        _ = try await client.execute(HTTPClientRequest(method: .post, url: url(server)))
        let retried = try await client.execute(HTTPClientRequest(method: .post, url: url(server)))
        XCTAssertEqual(retried.status, .ok)
        XCTAssertEqual(server.requests.count, 3)
        XCTAssertEqual(server.acceptedConnections, 2)

        count.store(1, ordering: .relaxed)
        await expectFailure(.connectionClosed) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(method: .post, url: url(server), retryOnStaleConnection: false))
        }
        // A connection that fails on its first request is not retried.
        let fresh = try ScriptedHTTPServer { _ in .hangUp }
        await expectFailure(.connectionClosed) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: url(fresh)))
        }
        XCTAssertEqual(fresh.requests.count, 1)
    }

    func testConnectionsPerHostAndQueueAreBounded() async throws {
        let server = try ScriptedHTTPServer { _ in .delayed(.milliseconds(30), .bytes(ScriptedHTTPServer.response(body: "ok"), close: false)) }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 2
        configuration.maxQueuedRequestsPerHost = 100
        let single = try EventLoopGroup(threads: 1)
        defer { single.shutdownGracefully() }
        let client = HTTPClient(group: single, configuration: configuration)
        let target = url(server)
        let results = await withTaskGroup(of: Bool.self) { tasks in
            for _ in 0..<20 {
                tasks.addTask { (try? await client.execute(HTTPClientRequest(url: target))) != nil }
            }
            return await tasks.reduce(into: [Bool]()) { $0.append($1) }
        }
        XCTAssertEqual(results.filter { $0 }.count, 20)
        XCTAssertEqual(server.acceptedConnections, 2)

        configuration.maxConnectionsPerHost = 1
        configuration.maxQueuedRequestsPerHost = 2
        let tight = HTTPClient(group: single, configuration: configuration)
        let errors = await withTaskGroup(of: HTTPClientError?.self) { tasks in
            for _ in 0..<6 {
                tasks.addTask {
                    do {
                        _ = try await tight.execute(HTTPClientRequest(url: target))
                        return nil
                    } catch {
                        return error as? HTTPClientError
                    }
                }
            }
            return await tasks.reduce(into: [HTTPClientError?]()) { $0.append($1) }
        }
        XCTAssertEqual(errors.filter { $0 == nil }.count, 3, "one in flight and two queued succeed")
        XCTAssertEqual(errors.filter { $0 == HTTPClientError.tooManyQueuedRequests }.count, 3)
    }

    func testIdleConnectionsCloseAfterIdleTimeout() async throws {
        let server = try ScriptedHTTPServer { _ in .bytes(ScriptedHTTPServer.response(body: "ok"), close: false) }
        var configuration = HTTPClient.Configuration()
        configuration.idleTimeout = .milliseconds(100)
        let client = HTTPClient(group: group, configuration: configuration)
        _ = try await client.execute(HTTPClientRequest(url: url(server)))
        let idleBefore = await client.idleConnectionCount()
        XCTAssertEqual(idleBefore, 1)
        try await Task.sleep(for: .milliseconds(400))
        let idleAfter = await client.idleConnectionCount()
        XCTAssertEqual(idleAfter, 0)
        _ = try await client.execute(HTTPClientRequest(url: url(server)))
        XCTAssertEqual(server.acceptedConnections, 2)
    }

    func testShutdownFailsPendingRequests() async throws {
        let server = try ScriptedHTTPServer { _ in .silence }
        let client = HTTPClient(group: group)
        let target = url(server)
        let pending = Task { () -> HTTPClientError? in
            do {
                _ = try await client.execute(HTTPClientRequest(url: target))
                return nil
            } catch {
                return error as? HTTPClientError
            }
        }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        client.shutdown()
        let error = await pending.value
        XCTAssertEqual(error, HTTPClientError.shutDown)
        await expectFailure(.shutDown) { () async throws(HTTPClientError) in
            try await client.execute(HTTPClientRequest(url: target))
        }
    }
}

/// A loopback port nothing listens on (bound, then released).
enum FreeLoopbackPort {
    static func next() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
