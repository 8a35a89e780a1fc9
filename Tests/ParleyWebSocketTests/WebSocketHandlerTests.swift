import Foundation
import Synchronization
import XCTest
import ParleyNet
@testable import ParleyWebSocket

/// Echoes, and obeys a few commands: "flood" sends 64 KiB messages until the socket refuses,
/// "bye" closes with 1000. Greets on open when asked.
private final class ScriptedDelegate: WebSocketDelegate {
    let closes: CloseLog
    let greeting: String?
    let floodResult: FloodResult

    init(closes: CloseLog, greeting: String? = nil, floodResult: FloodResult) {
        self.closes = closes
        self.greeting = greeting
        self.floodResult = floodResult
    }

    func webSocketDidOpen(_ socket: WebSocketHandler) {
        if let greeting { socket.sendText(greeting) }
    }

    func webSocket(_ socket: WebSocketHandler, didReceiveText text: String) {
        switch text {
        case "flood":
            let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
            var sent = 0
            var maxPending = 0
            while sent < 10_000, socket.sendBinary(chunk) {
                sent += 1
                maxPending = max(maxPending, socket.pendingOutboundBytes)
            }
            floodResult.record(sent: sent, maxPending: maxPending, openAfter: socket.isOpen)
        case "bye":
            socket.close(code: .normalClosure, reason: "done")
        default:
            socket.sendText(text)
        }
    }

    func webSocket(_ socket: WebSocketHandler, didReceiveBinary bytes: [UInt8]) { socket.sendBinary(bytes) }
    func webSocket(_ socket: WebSocketHandler, didClose code: WebSocketCloseCode, reason: String) { closes.append(code, reason) }
}

private final class FloodResult: Sendable {
    private let value = Mutex<(sent: Int, maxPending: Int, openAfter: Bool)?>(nil)
    func record(sent: Int, maxPending: Int, openAfter: Bool) { value.withLock { $0 = (sent, maxPending, openAfter) } }
    var result: (sent: Int, maxPending: Int, openAfter: Bool)? { value.withLock { $0 } }
}

final class WebSocketHandlerTests: XCTestCase {
    private func makeServer(
        configuration: WebSocketHandler.Configuration = .init(), greeting: String? = nil, flood: FloodResult = FloodResult()
    ) throws -> EchoServer {
        try EchoServer(configuration: configuration) { ScriptedDelegate(closes: $0, greeting: greeting, floodResult: flood) }
    }

    func testEchoesTextAndBinary() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()
        try client.send(text: "héllo")
        XCTAssertEqual(try client.readFrame(), DecodedFrame(opcode: .text, payload: Array("héllo".utf8)))
        let big = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try client.send(.binary, big)
        XCTAssertEqual(try client.readFrame(), DecodedFrame(opcode: .binary, payload: big))
    }

    func testFragmentedMessageWithPingGetsPongThenEcho() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()
        // Send byte by byte, so the server sees every split.
        let bytes = client.frame(.text, Array("frag".utf8), fin: false) + client.frame(.ping, Array("are you there".utf8))
            + client.frame(.continuation, Array("ment €".utf8))
        for byte in bytes { try client.send([byte]) }
        XCTAssertEqual(try client.readFrame(), DecodedFrame(opcode: .pong, payload: Array("are you there".utf8)))
        XCTAssertEqual(try client.readFrame(), DecodedFrame(opcode: .text, payload: Array("fragment €".utf8)))
    }

    func testFrameInTheSameWriteAsTheUpgradeAndGreetingOnOpen() throws {
        let server = try makeServer(greeting: "welcome")
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade(then: client.frame(.text, Array("early".utf8)))
        XCTAssertEqual(try client.readFrame().text, "welcome")
        XCTAssertEqual(try client.readFrame().text, "early")
    }

    func testBadHandshakeGetsAnErrorResponseAndIsClosed() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.send(Array(TestWebSocketClient.upgradeRequest.replacingOccurrences(of: "Version: 13", with: "Version: 8").utf8))
        let head = try client.readHead()
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 426 "), head)
        XCTAssertTrue(head.contains("Sec-WebSocket-Version: 13"))
        _ = try client.readToEOF()

        let second = try TestWebSocketClient(port: server.port)
        try second.send(Array("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8))
        XCTAssertTrue(try second.readHead().hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(second.readsEOF())
    }

    func testInvalidUTF8IsClosedWith1007() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()
        try client.send(.text, [0x68, 0x69, 0xC0, 0x80], fin: false)
        XCTAssertEqual(try client.readFrame().closeCode, 1007)
        XCTAssertTrue(client.readsEOF())
        XCTAssertEqual(server.closes.wait(count: 1).first?.0, .invalidPayloadData)
    }

    func testProtocolErrorsCloseWithTheirCodes() throws {
        let server = try makeServer(configuration: .init(limits: .init(maxFrameSize: 1000, maxMessageSize: 1000)))
        defer { server.shutdown() }
        let cases: [([UInt8], UInt16)] = [
            ([0x83, 0x80, 1, 2, 3, 4], 1002),         // reserved opcode
            ([0xC1, 0x80, 1, 2, 3, 4], 1002),         // RSV1
            ([0x81, 0x02, 0x68, 0x69], 1002),         // unmasked
            ([0x82, 0xFE, 0x03, 0xE9], 1009),         // 1001-byte frame, refused from its header
        ]
        for (bytes, code) in cases {
            let client = try TestWebSocketClient(port: server.port)
            try client.upgrade()
            try client.send(bytes)
            XCTAssertEqual(try client.readFrame().closeCode, code, "\(bytes)")
            XCTAssertTrue(client.readsEOF())
        }
    }

    func testClientCloseIsEchoedAndTheServerClosesTheConnection() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()
        try client.send(.close, [0x03, 0xE8] + Array("bye".utf8))
        XCTAssertEqual(try client.readFrame().closeCode, 1000)
        XCTAssertTrue(client.readsEOF())
        let closes = server.closes.wait(count: 1)
        XCTAssertEqual(closes.first?.0, .normalClosure)
        XCTAssertEqual(closes.first?.1, "bye")
    }

    func testServerCloseWaitsForThePeerThenTimesOut() throws {
        let server = try makeServer(configuration: .init(closeTimeout: .milliseconds(300)))
        defer { server.shutdown() }
        // A peer that answers.
        let polite = try TestWebSocketClient(port: server.port)
        try polite.upgrade()
        try polite.send(text: "bye")
        let close = try polite.readFrame()
        XCTAssertEqual(close.closeCode, 1000)
        XCTAssertEqual(String(decoding: close.payload.dropFirst(2), as: UTF8.self), "done")
        try polite.send(.close, [0x03, 0xE8])
        XCTAssertTrue(polite.readsEOF())
        XCTAssertEqual(server.closes.wait(count: 1).first?.0, .normalClosure)

        // A peer that never answers is dropped after the close timeout.
        let silent = try TestWebSocketClient(port: server.port)
        try silent.upgrade()
        try silent.send(text: "bye")
        XCTAssertEqual(try silent.readFrame().closeCode, 1000)
        let started = Date()
        XCTAssertTrue(silent.readsEOF())
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        let closes = server.closes.wait(count: 2)
        XCTAssertEqual(closes.count, 2)
        XCTAssertEqual(closes.last?.0, .abnormalClosure)
        XCTAssertEqual(closes.last?.1, "close handshake timed out")
    }

    func testIdlePeerIsPingedAndDroppedWhenItStopsAnswering() throws {
        let configuration = WebSocketHandler.Configuration(pingInterval: .milliseconds(200), pongTimeout: .milliseconds(300))
        let server = try makeServer(configuration: configuration)
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()

        // Traffic keeps the connection from being pinged.
        for i in 0..<5 {
            try client.send(text: "tick \(i)")
            XCTAssertEqual(try client.readFrame(), DecodedFrame(opcode: .text, payload: Array("tick \(i)".utf8)))
            usleep(80_000)
        }
        // Silence: a ping comes; answering it keeps the connection open, and another ping follows.
        let ping = try client.readFrame()
        XCTAssertEqual(ping.opcode, .ping)
        try client.send(.pong, ping.payload)
        XCTAssertEqual(try client.readFrame().opcode, .ping)
        // Not answering: dropped without a close frame, reported as 1006.
        let started = Date()
        XCTAssertTrue(client.readsEOF())
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let closes = server.closes.wait(count: 1)
        XCTAssertEqual(closes.first?.0, .abnormalClosure)
        XCTAssertTrue(closes.first?.1.contains("pong") ?? false, "\(closes)")
    }

    func testReaderThatDoesNotKeepUpIsDroppedAtTheOutboundBound() throws {
        let flood = FloodResult()
        let bound = 256 * 1024
        let server = try makeServer(configuration: .init(maxPendingOutboundBytes: bound), flood: flood)
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port, receiveBuffer: 4096)
        try client.upgrade()
        try client.send(text: "flood")
        let closes = server.closes.wait(count: 1)
        XCTAssertEqual(closes.first?.0, .abnormalClosure)
        XCTAssertEqual(closes.first?.1, "outbound buffer full")
        let result = try XCTUnwrap(flood.result)
        XCTAssertLessThan(result.sent, 10_000, "sending stops once the socket is dropped")
        XCTAssertFalse(result.openAfter)
        XCTAssertLessThanOrEqual(result.maxPending, bound)
    }

    func testPeerThatPingsButNeverReadsIsDroppedAtTheSlowReaderDeadline() throws {
        // Bounds well above what is queued, so only the slow-reader deadline can close it.
        let server = try EchoServer(
            configuration: .init(limits: .init(maxFrameSize: 1 << 20, maxMessageSize: 1 << 20), maxPendingOutboundBytes: 64 << 20),
            maxOutboundBytes: 64 << 20, slowReaderTimeout: .seconds(1))
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port, receiveBuffer: 4096)
        try client.upgrade()
        // 8 MiB of echoes it never reads: more than the kernel's socket buffers hold.
        let message = [UInt8](repeating: 0x42, count: 512 << 10)
        for _ in 0..<16 { try client.send(.binary, message) }
        let started = Date()
        // Pings every 100 ms (the server queues a pong for each): they do not keep it alive.
        var closes: [(WebSocketCloseCode, String)] = []
        while Date().timeIntervalSince(started) < 6 {
            closes = server.closes.all
            if !closes.isEmpty { break }
            try? client.send(.ping, Array("are you there".utf8))
            Thread.sleep(forTimeInterval: 0.1)
        }
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(closes.first?.0, .abnormalClosure, "\(closes)")
        XCTAssertNotEqual(closes.first?.1, "outbound buffer full")
        XCTAssertGreaterThan(elapsed, 0.9)
        XCTAssertLessThan(elapsed, 3, "dropped \(elapsed) s after it stopped reading, with a 1 s deadline")
    }

    func testQuiesceClosesWithGoingAway() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = try TestWebSocketClient(port: server.port)
        try client.upgrade()
        try client.send(text: "hi")
        XCTAssertEqual(try client.readFrame().text, "hi")
        server.server.quiesce()
        XCTAssertEqual(try client.readFrame().closeCode, 1001)
        try client.send(.close, [0x03, 0xE9])
        XCTAssertTrue(client.readsEOF())
        XCTAssertEqual(server.closes.wait(count: 1).first?.0, .goingAway)
    }

    func testIdleConnectionsStayUnder4KiBEach() throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let count = 1000
        var clients: [TestWebSocketClient] = []
        clients.reserveCapacity(count)
        // Warm up allocator pools and the loop's tables, then measure resident memory across `count`
        // more connections that each exchanged a message and went idle. Client objects are in
        // the figure too, so the server's share is smaller still. Messages are 3.5 KiB, so a
        // reassembly buffer kept after the message would break the bound.
        for _ in 0..<50 {
            let client = try TestWebSocketClient(port: server.port)
            try client.upgrade()
            clients.append(client)
        }
        let before = try Self.residentBytes()
        for i in 0..<count {
            let client = try TestWebSocketClient(port: server.port)
            try client.upgrade()
            try client.send(text: "message \(i) " + String(repeating: "x", count: 3500))
            XCTAssertEqual(try client.readFrame().payload.count, "message \(i) ".utf8.count + 3500)
            clients.append(client)
        }
        usleep(100_000)
        let perConnection = (try Self.residentBytes() - before) / count
        print("memory per idle WebSocket connection (server and test client): \(perConnection) bytes")
        XCTAssertEqual(server.server.openConnections(), count + 50)
        XCTAssertLessThan(perConnection, 4096, "an idle WebSocket connection costs under 4 KiB")
    }

    /// Resident set size of this process, from /proc/self/statm; throws (failing the test) when unreadable.
    static func residentBytes() throws -> Int {
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let pages = try XCTUnwrap(statm.split(separator: " ").dropFirst().first.flatMap { Int($0) }, "no resident pages in \(statm)")
        XCTAssertGreaterThan(pages, 0)
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
