import Foundation
import ParleyNet
import Synchronization
@testable import ParleyWebSocket

/// Test-only upgrade path: parses just enough HTTP/1.1 to run `WebSocketHandshake`, writes the
/// 101 (or the error response), then installs `WebSocketHandler`. ParleyHTTP does this in the
/// real server.
final class MinimalUpgradeHandler: ConnectionHandler {
    private var buffer: [UInt8] = []
    private let handshake: WebSocketHandshake
    private let configuration: WebSocketHandler.Configuration
    private let makeDelegate: () -> any WebSocketDelegate

    init(handshake: WebSocketHandshake, configuration: WebSocketHandler.Configuration, makeDelegate: @escaping () -> any WebSocketDelegate) {
        self.handshake = handshake
        self.configuration = configuration
        self.makeDelegate = makeDelegate
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        guard let end = Self.headEnd(buffer) else {
            if buffer.count > 16 * 1024 {
                connection.write(Array("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                connection.close()
            }
            return
        }
        let lines = String(decoding: buffer[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
            connection.write(Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            connection.close()
            return
        }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }
        let leftover = Array(buffer[(end + 4)...])
        buffer = []
        do {
            let accepted = try handshake.validate(method: String(requestLine[0]), headers: headers)
            connection.write(accepted.responseBytes(extraHeaders: [("Server", "Parley")]))
            WebSocketHandler.install(on: connection, configuration: configuration, delegate: makeDelegate(), initialBytes: leftover)
        } catch {
            connection.write(error.responseBytes)
            connection.close()
        }
    }

    func connectionDidClose(_ connection: Connection) {}

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }
}

/// Closes seen by the server, for assertions from the test thread.
final class CloseLog: Sendable {
    private let entries = Mutex<[(WebSocketCloseCode, String)]>([])

    func append(_ code: WebSocketCloseCode, _ reason: String) { entries.withLock { $0.append((code, reason)) } }
    var all: [(WebSocketCloseCode, String)] { entries.withLock { $0 } }

    /// Waits until at least `count` closes were logged.
    func wait(count: Int, timeout: TimeInterval = 10) -> [(WebSocketCloseCode, String)] {
        let deadline = Date().addingTimeInterval(timeout)
        while all.count < count && Date() < deadline { usleep(5_000) }
        return all
    }
}

/// Sends every message back as it came.
final class EchoDelegate: WebSocketDelegate {
    private let closes: CloseLog

    init(closes: CloseLog) { self.closes = closes }

    func webSocket(_ socket: WebSocketHandler, didReceiveText text: String) { socket.sendText(text) }
    func webSocket(_ socket: WebSocketHandler, didReceiveBinary bytes: [UInt8]) { socket.sendBinary(bytes) }
    func webSocket(_ socket: WebSocketHandler, didClose code: WebSocketCloseCode, reason: String) { closes.append(code, reason) }
}

/// A WebSocket server on 127.0.0.1 and a free port; echoes unless given another delegate.
final class EchoServer {
    let group: EventLoopGroup
    let server: TCPServer
    let closes = CloseLog()

    init(
        threads: Int = 1, handshake: WebSocketHandshake = WebSocketHandshake(),
        configuration: WebSocketHandler.Configuration = WebSocketHandler.Configuration(), maxOutboundBytes: Int = 4 << 20,
        slowReaderTimeout: Duration = .seconds(30),
        tls: TLSServerContext? = nil,
        makeDelegate: @escaping @Sendable (CloseLog) -> any WebSocketDelegate = { EchoDelegate(closes: $0) }
    ) throws {
        group = try EventLoopGroup(threads: threads)
        var options = TCPServer.Options(host: "127.0.0.1", port: 0)
        options.maxOutboundBytes = maxOutboundBytes
        options.slowReaderTimeout = slowReaderTimeout
        options.tls = tls
        let closes = self.closes
        server = TCPServer(group: group, options: options) { _ in
            MinimalUpgradeHandler(handshake: handshake, configuration: configuration) { makeDelegate(closes) }
        }
        try server.start()
    }

    var port: Int { server.port }

    func shutdown() {
        server.closeAll()
        group.shutdownGracefully()
    }
}
