import Foundation

/// A minimal blocking HTTP/1.1 client over a raw loopback socket, for tests.
public final class TestHTTPClient: @unchecked Sendable {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        public var text: String { String(decoding: body, as: UTF8.self) }

        /// The body parsed as a JSON object or array (Foundation's parser, independent of ours).
        public var json: Any? { try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
    }

    public enum ClientError: Error { case connectFailed(Int32), closed, malformed(String) }

    public let fd: Int32
    private var buffer: [UInt8] = []

    public init(port: Int, timeoutSeconds: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw ClientError.connectFailed(code)
        }
    }

    deinit { close(fd) }

    /// Sends raw bytes.
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ClientError.closed }
            offset += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Sends one request and reads its response (keep-alive).
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws -> Response {
        // A test may send its own Host (a spoofed one, say) instead of the loopback address.
        var head = "\(method) \(path) HTTP/1.1\r\n" + (headers.contains { $0.0.lowercased() == "host" } ? "" : "Host: 127.0.0.1\r\n")
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
        return try readResponse(method: method)
    }

    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], json: String) throws -> Response {
        try request(method, path, headers: headers + [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    /// Reads one response; `method` HEAD means no body.
    public func readResponse(method: String = "GET") throws -> Response {
        let headEnd = try readUntil([13, 10, 13, 10])
        let headText = String(decoding: buffer[..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw ClientError.malformed(statusLine) }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let response = Response(status: status, headers: headers, body: [])
        if method == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status) { return response }
        var result = response
        if let length = response.header("Content-Length").flatMap(Int.init) {
            try fill(length)
            result.body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                let lineEnd = try readUntil([13, 10])
                let size = Int(String(decoding: buffer[..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
                buffer.removeFirst(lineEnd + 2)
                try fill(size + 2)
                result.body += buffer[..<size]
                buffer.removeFirst(size + 2)
                if size == 0 { break }
            }
        } else {
            while let more = try? receiveMore(), more > 0 {}
            result.body = buffer
            buffer = []
        }
        return result
    }

    /// True when the server closed the connection (EOF or reset) within the receive timeout.
    public func isClosedByPeer() -> Bool {
        while true {
            do {
                if try receiveMore() == 0 { return true }
            } catch {
                return errno == ECONNRESET
            }
        }
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for i in searchFrom...(buffer.count - marker.count) where Array(buffer[i..<(i + marker.count)]) == marker { return i }
                searchFrom = buffer.count - marker.count + 1
            }
            guard try receiveMore() > 0 else { throw ClientError.closed }
        }
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count {
            guard try receiveMore() > 0 else { throw ClientError.closed }
        }
    }

    @discardableResult
    private func receiveMore() throws -> Int {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { throw ClientError.closed }
        buffer += chunk[..<n]
        return n
    }
}
