import Foundation
@testable import ParleyWebSocket

/// A blocking loopback WebSocket client for tests: raw handshake, masked frames, frame reads.
final class TestWebSocketClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let fd: Int32
    private var collector = FrameCollector(expectsMaskedFrames: false)
    private var pending: [UInt8] = []
    private var maskSeed: UInt32 = 0x9E37_79B9

    init(port: Int, receiveBuffer: Int32? = nil, timeout: Int = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw Failure(description: "connect failed: errno \(errno)") }
    }

    deinit { close(fd) }

    static let upgradeRequest = "GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

    /// Performs the upgrade; `then` bytes go out in the same write as the request.
    @discardableResult
    func upgrade(then extra: [UInt8] = []) throws -> String {
        try send(Array(Self.upgradeRequest.utf8) + extra)
        let head = try readHead()
        guard head.hasPrefix("HTTP/1.1 101 "), head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") else {
            throw Failure(description: "bad upgrade response: \(head)")
        }
        return head
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            offset += n
        }
    }

    /// A masked frame as a client sends it.
    func frame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        maskSeed = maskSeed &* 1_664_525 &+ 1_013_904_223
        return WebSocketFrameEncoder.encode(opcode: opcode, fin: fin, payload: payload, maskingKey: maskSeed)
    }

    func send(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) throws {
        try send(frame(opcode, payload, fin: fin))
    }

    func send(text: String) throws { try send(.text, Array(text.utf8)) }

    /// Reads up to the end of the HTTP response head; bytes after it stay for `readFrame`.
    func readHead() throws -> String {
        while true {
            if let end = pending.indices.dropLast(3).first(where: { pending[$0] == 13 && pending[$0 + 1] == 10 && pending[$0 + 2] == 13 && pending[$0 + 3] == 10 }) {
                let head = String(decoding: pending[..<(end + 4)], as: UTF8.self)
                pending.removeFirst(end + 4)
                return head
            }
            guard let chunk = try receive() else { throw Failure(description: "EOF before the response head") }
            pending += chunk
        }
    }

    /// Reads the rest of an HTTP response after its head (for error responses with a body).
    func readToEOF() throws -> [UInt8] {
        var all = pending
        pending = []
        while let chunk = try receive() { all += chunk }
        return all
    }

    /// Reads the next whole frame.
    func readFrame() throws -> DecodedFrame {
        while collector.frames.isEmpty {
            let chunk: [UInt8]
            if !pending.isEmpty {
                chunk = pending
                pending = []
            } else {
                guard let received = try receive() else { throw Failure(description: "EOF while waiting for a frame") }
                chunk = received
            }
            try collector.feed(chunk)
        }
        return collector.frames.removeFirst()
    }

    /// True if the server closes the TCP connection (EOF or reset) before the receive timeout;
    /// then closes our side too, as a client does after the server's FIN.
    func readsEOF() -> Bool {
        do {
            while let chunk = try receive() {
                try collector.feed(chunk)
            }
            shutdown(fd, Int32(SHUT_WR))
            return true
        } catch {
            return (error as? Failure)?.description.contains("errno \(ECONNRESET)") ?? false
        }
    }

    /// One recv; nil at EOF.
    private func receive() throws -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { return nil }
        guard n > 0 else { throw Failure(description: "recv failed: errno \(errno)") }
        return Array(buffer[..<n])
    }
}
