import Foundation
import ParleyNet
import Synchronization

/// A real-socket HTTP/1.1 server for tests whose replies are scripted per request: any bytes,
/// after a delay, closing or not, or no reply at all. Records every request it parsed.
final class ScriptedHTTPServer: Sendable {
    struct Request: Sendable {
        var method: String
        var target: String
        var headers: [(String, String)]
        var body: [UInt8]
        /// Which accepted connection carried it (1-based, in accept order).
        var connection: Int

        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    enum Reply: Sendable {
        /// Writes the bytes, then closes when `close`.
        case bytes([UInt8], close: Bool)
        /// Closes without answering.
        case hangUp
        /// Never answers (the client must time out).
        case silence
        /// Answers after a delay.
        indirect case delayed(Duration, Reply)
        /// Writes the first bytes, then the rest after a delay (a slow body).
        case split([UInt8], Duration, [UInt8])
    }

    /// Requests seen and connections numbered, shared by the handlers.
    final class Log: Sendable {
        let requests = Mutex<[Request]>([])
        let connections = Atomic<Int>(0)
    }

    let group: EventLoopGroup
    let server: TCPServer
    private let log = Log()

    init(respond: @escaping @Sendable (Request) -> Reply) throws {
        group = try EventLoopGroup(threads: 1)
        let log = self.log
        server = TCPServer(group: group, options: .init(host: "127.0.0.1", port: 0)) { _ in
            ScriptedHandler(number: log.connections.add(1, ordering: .relaxed).newValue, log: log, respond: respond)
        }
        try server.start()
    }

    deinit {
        server.closeAll()
        group.shutdownGracefully()
    }

    var port: Int { server.port }
    var requests: [Request] { log.requests.withLock { $0 } }
    var acceptedConnections: Int { server.acceptedConnections }

    static func response(status: Int = 200, headers: [(String, String)] = [], body: String = "", contentLength: Bool = true) -> [UInt8] {
        var text = "HTTP/1.1 \(status) Status\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if contentLength { text += "Content-Length: \(body.utf8.count)\r\n" }
        return Array((text + "\r\n" + body).utf8)
    }
}

/// Parses requests (head, Content-Length body) and plays the scripted replies. Loop thread only.
private final class ScriptedHandler: ConnectionHandler {
    let number: Int
    let log: ScriptedHTTPServer.Log
    let respond: @Sendable (ScriptedHTTPServer.Request) -> ScriptedHTTPServer.Reply
    var buffer: [UInt8] = []

    init(number: Int, log: ScriptedHTTPServer.Log, respond: @escaping @Sendable (ScriptedHTTPServer.Request) -> ScriptedHTTPServer.Reply) {
        self.number = number
        self.log = log
        self.respond = respond
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        while let request = nextRequest() {
            log.requests.withLock { $0.append(request) }
            play(respond(request), on: connection)
        }
    }

    func connectionDidClose(_ connection: Connection) {}

    private func nextRequest() -> ScriptedHTTPServer.Request? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard buffer.count >= 4, let end = (0...(buffer.count - 4)).first(where: { Array(buffer[$0..<($0 + 4)]) == separator }) else { return nil }
        let head = String(decoding: buffer[0..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
        guard buffer.count >= end + 4 + length else { return nil }
        let body = Array(buffer[(end + 4)..<(end + 4 + length)])
        buffer.removeFirst(end + 4 + length)
        return .init(method: String(requestLine.first ?? ""), target: requestLine.count > 1 ? String(requestLine[1]) : "",
                     headers: headers, body: body, connection: number)
    }

    private func play(_ reply: ScriptedHTTPServer.Reply, on connection: Connection) {
        switch reply {
        case .bytes(let bytes, let close):
            connection.write(bytes)
            if close { connection.close() }
        case .hangUp:
            connection.close(immediately: true)
        case .silence:
            break
        case .delayed(let delay, let next):
            connection.loop.schedule(after: delay) { [weak self, weak connection] in
                guard let self, let connection, connection.isOpen else { return }
                self.play(next, on: connection)
            }
        case .split(let first, let delay, let rest):
            connection.write(first)
            connection.loop.schedule(after: delay) { [weak connection] in
                guard let connection, connection.isOpen else { return }
                connection.write(rest)
            }
        }
    }
}
