import Foundation

/// A blocking loopback HTTP/1.1 client over a raw POSIX socket, for tests.
final class HTTPTestClient: @unchecked Sendable {
    struct Response: CustomStringConvertible {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        var text: String { String(decoding: body, as: UTF8.self) }
        var description: String { "\(status) \(headers.map { "\($0.name): \($0.value)" }) \(text.debugDescription)" }
    }

    enum Failure: Error {
        case connect(Int32), send(Int32), closed, timeout, malformed(String)
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, timeoutSeconds: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        setTimeout(seconds: timeoutSeconds)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure.connect(code)
        }
    }

    deinit { Glibc.close(fd) }

    func setTimeout(seconds: Int, microseconds: Int = 0) {
        var timeout = timeval(tv_sec: seconds, tv_usec: microseconds)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure.send(errno) }
            offset += sent
        }
    }

    /// Half-closes the sending side.
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Reads more bytes into the buffer; false at EOF or reset.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer += chunk[0..<count]
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw Failure.timeout }
        return false
    }

    /// The next response (interim 1xx responses included), framed by Content-Length.
    func readResponse(headRequest: Bool = false) throws -> Response {
        while true {
            if let end = headEnd() {
                let head = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
                guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1", let status = Int(statusLine[1]) else {
                    throw Failure.malformed(head)
                }
                let headers = lines.map { line -> (name: String, value: String) in
                    let colon = line.firstIndex(of: ":")!
                    return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                let length = headers.first { $0.name.lowercased() == "content-length" }.flatMap { Int($0.value) } ?? 0
                let bodyLength = headRequest || status < 200 || status == 204 || status == 304 ? 0 : length
                while buffer.count < end + 4 + bodyLength {
                    guard try fill() else { throw Failure.closed }
                }
                let body = Array(buffer[(end + 4)..<(end + 4 + bodyLength)])
                buffer.removeFirst(end + 4 + bodyLength)
                return Response(status: status, headers: headers, body: body)
            }
            guard try fill() else { throw Failure.closed }
        }
    }

    /// The next response's status line and fields only; the body stays unread.
    func readHead() throws -> Response {
        while true {
            if let end = headEnd() {
                let head = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure.malformed(head) }
                let headers = lines.map { line -> (name: String, value: String) in
                    let colon = line.firstIndex(of: ":")!
                    return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                buffer.removeFirst(end + 4)
                return Response(status: status, headers: headers, body: [])
            }
            guard try fill() else { throw Failure.closed }
        }
    }

    /// Reads and drops `count` body bytes, calling `progress` with the running total now and then.
    func discard(_ count: Int, progress: (Int) -> Void = { _ in }) throws {
        var left = count
        var sinceReport = 0
        while left > 0 {
            if buffer.isEmpty { guard try fill() else { throw Failure.closed } }
            let taken = min(left, buffer.count)
            buffer.removeFirst(taken)
            left -= taken
            sinceReport += taken
            if sinceReport >= 1 << 20 {
                sinceReport = 0
                progress(count - left)
            }
        }
    }

    /// Reads a chunked body to its last chunk, dropping the data; returns the data's length.
    func discardChunkedBody(progress: (Int) -> Void = { _ in }) throws -> Int {
        var total = 0
        while true {
            let line = try readLine()
            guard let size = Int(line.split(separator: ";")[0], radix: 16) else { throw Failure.malformed(line) }
            if size == 0 {
                guard try readLine().isEmpty else { throw Failure.malformed("trailers") }
                return total
            }
            try discard(size)
            guard try readLine().isEmpty else { throw Failure.malformed("chunk end") }
            total += size
            progress(total)
        }
    }

    private func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: 10), index > 0, buffer[index - 1] == 13 {
                let line = String(decoding: buffer[0..<(index - 1)], as: UTF8.self)
                buffer.removeFirst(index + 1)
                return line
            }
            guard try fill() else { throw Failure.closed }
        }
    }

    /// Exactly `count` raw bytes (after any buffered ones).
    func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw Failure.closed }
        }
        let bytes = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return bytes
    }

    private func headEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4) where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// Whether the server closed the connection (EOF or reset) with nothing more to read.
    func readsEOF() -> Bool {
        guard buffer.isEmpty else { return false }
        do {
            return try !fill()
        } catch {
            return false
        }
    }

    /// Everything the server sends from now until it closes (or the read timeout passes).
    func readUntilClosed() -> String {
        while (try? fill()) == true {}
        defer { buffer.removeAll() }
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Whether the server closed within `seconds`, discarding anything it still sends.
    func closedWithin(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        setTimeout(seconds: 0, microseconds: 100_000)
        while Date() < deadline {
            buffer.removeAll()
            do {
                if try !fill() { return true }
            } catch {
                continue
            }
        }
        return false
    }
}

/// Raises the soft open-files limit so a test can hold many sockets.
func raiseOpenFileLimit(to wanted: rlim_t) {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < wanted {
        limit.rlim_cur = min(wanted, limit.rlim_max)
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
