import Foundation
import Synchronization
import XCTest
@testable import ParleyNet

/// Echoes bytes back; closes on "quit".
private final class EchoHandler: ConnectionHandler {
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        let data = Array(bytes)
        if data == Array("quit".utf8) {
            connection.close()
            return
        }
        connection.write(data)
    }

    func connectionDidClose(_ connection: Connection) {}
}

final class TCPServerTests: XCTestCase {
    func testEchoOverRealSocketsOnAllLoops() throws {
        let group = try EventLoopGroup(threads: 2)
        defer { group.shutdownGracefully() }
        let server = TCPServer(group: group, options: .init(host: "127.0.0.1", port: 0)) { _ in EchoHandler() }
        try server.start()
        XCTAssertGreaterThan(server.port, 0)

        for i in 0..<50 {
            let socket = try TestSocket(port: server.port)
            let message = "hello \(i) " + String(repeating: "x", count: i * 100)
            try socket.send(message)
            XCTAssertEqual(try socket.receive(count: message.utf8.count), message)
            try socket.send("quit")
            XCTAssertTrue(try socket.readsEOF())
        }
        // Connections are counted down after they close.
        let deadline = Date().addingTimeInterval(5)
        while server.openConnections() > 0 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.openConnections(), 0)
        XCTAssertEqual(server.acceptedConnections, 50)
    }

    func testLargeWriteIsFlushedToSlowReader() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let server = TCPServer(group: group, options: .init(host: "127.0.0.1", port: 0)) { _ in EchoHandler() }
        try server.start()
        let socket = try TestSocket(port: server.port)
        let big = String(repeating: "abcdefgh", count: 256 * 1024)  // 2 MiB echoed back
        let sender = Thread { try? socket.send(big) }
        sender.start()
        XCTAssertEqual(try socket.receive(count: big.utf8.count).count, big.utf8.count)
    }

    func testOutboundBoundClosesReaderThatDoesNotKeepUp() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        var options = TCPServer.Options(host: "127.0.0.1", port: 0)
        options.maxOutboundBytes = 64 * 1024
        let server = TCPServer(group: group, options: options) { _ in EchoHandler() }
        try server.start()
        let socket = try TestSocket(port: server.port)
        socket.setReceiveBuffer(4096)
        // Send a lot without reading: the server's queue passes its bound and it closes.
        let chunk = String(repeating: "z", count: 64 * 1024)
        var failed = false
        for _ in 0..<200 {
            do { try socket.send(chunk) } catch { failed = true; break }
        }
        XCTAssertTrue(failed || server.openConnections() == 0)
        let deadline = Date().addingTimeInterval(5)
        while server.openConnections() > 0 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.openConnections(), 0)
    }

    func testMaxConnectionsRefusesExtraClients() throws {
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        var options = TCPServer.Options(host: "127.0.0.1", port: 0)
        options.maxConnections = 2
        let server = TCPServer(group: group, options: options) { _ in EchoHandler() }
        try server.start()
        let a = try TestSocket(port: server.port)
        let b = try TestSocket(port: server.port)
        try a.send("a"); XCTAssertEqual(try a.receive(count: 1), "a")
        try b.send("b"); XCTAssertEqual(try b.receive(count: 1), "b")
        let c = try TestSocket(port: server.port)
        try? c.send("c")
        XCTAssertTrue(try c.readsEOF())
    }
}
