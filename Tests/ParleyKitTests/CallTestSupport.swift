import Foundation
import ParleyJSON
import ParleyKit

/// A stand-in for the app's WebRTC stack: fixed SDPs, records what the SDK hands it.
final class RecordingMedia: CallMediaSession, @unchecked Sendable {
    private let lock = NSLock()
    private var _remote: [(String, SDPKind)] = []
    private var _candidates: [JSONValue] = []
    private var _closed = 0
    let offer: String

    init(offer: String) { self.offer = offer }

    var remote: [(String, SDPKind)] { lock.withLock { _remote } }
    var candidates: [JSONValue] { lock.withLock { _candidates } }
    var closed: Int { lock.withLock { _closed } }

    func makeOffer(for call: Call) async throws -> String { offer }
    func setRemoteDescription(_ sdp: String, kind: SDPKind, for call: Call) async { lock.withLock { _remote.append((sdp, kind)) } }
    func addRemoteCandidates(_ candidates: [JSONValue], for call: Call) async { lock.withLock { _candidates += candidates } }
    func close(_ call: Call) async { lock.withLock { _closed += 1 } }
}

/// Collects a call's event stream so tests can wait for states.
actor CallWatcher {
    private(set) var events: [CallEvent] = []
    private var waiters: [(check: @Sendable ([CallEvent]) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []

    init(_ call: Call) {
        Task { [weak self] in
            for await event in call.events { await self?.append(event) }
        }
    }

    private func append(_ event: CallEvent) {
        events.append(event)
        var remaining: [(check: @Sendable ([CallEvent]) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
        for waiter in waiters {
            if waiter.check(events) { waiter.continuation.resume(returning: true) } else { remaining.append(waiter) }
        }
        waiters = remaining
    }

    var states: [CallState] { events.compactMap { if case .stateChanged(let state) = $0 { state } else { nil } } }

    var endCause: CallEndCause? {
        for event in events { if case .ended(let cause, _, _) = event { return cause } }
        return nil
    }

    /// Waits until the call is in `state` (or ended, which is final).
    @discardableResult
    func wait(for state: CallState, timeout: Duration = .seconds(20)) async -> Bool {
        await wait(timeout: timeout) { events in events.contains { $0 == .stateChanged(state) } }
    }

    func waitForEnd(timeout: Duration = .seconds(20)) async -> CallEndCause? {
        _ = await wait(timeout: timeout) { events in events.contains { if case .ended = $0 { true } else { false } } }
        return endCause
    }

    func wait(timeout: Duration, _ check: @escaping @Sendable ([CallEvent]) -> Bool) async -> Bool {
        if check(events) { return true }
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            await self?.expire()
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiters.append((check, $0)) }
    }

    private func expire() {
        let all = waiters
        waiters = []
        for waiter in all { waiter.continuation.resume(returning: waiter.check(events)) }
    }
}

/// A gorush-compatible push gateway on a loopback port: answers `POST /api/push` in sync mode
/// and keeps every notification it got (a real HTTP server on its own thread).
final class PushGatewaySink: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let lock = NSLock()
    private var notifications: [[String: Any]] = []

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Bool in
                bind(fd, raw, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw NSError(domain: "sink", code: Int(errno)) }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    var received: [[String: Any]] { lock.withLock { notifications } }

    private func acceptLoop() {
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Read one request: head, then Content-Length bytes.
            var headEnd: Int?
            while headEnd == nil {
                if let range = buffer.firstRange(of: Array("\r\n\r\n".utf8)) { headEnd = range.upperBound; break }
                let n = recv(client, &chunk, chunk.count, 0)
                guard n > 0 else { return }
                buffer += chunk[0..<n]
            }
            let head = String(decoding: buffer[..<headEnd!], as: UTF8.self).lowercased()
            let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
            while buffer.count < headEnd! + length {
                let n = recv(client, &chunk, chunk.count, 0)
                guard n > 0 else { return }
                buffer += chunk[0..<n]
            }
            let body = Data(buffer[headEnd!..<(headEnd! + length)])
            buffer.removeFirst(headEnd! + length)
            let list = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["notifications"] as? [[String: Any]] ?? []
            lock.withLock { notifications += list }
            let reply = "{\"success\":\"ok\",\"counts\":\(list.count),\"logs\":[]}"
            let response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(reply.utf8.count)\r\n\r\n\(reply)"
            _ = response.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }
    }
}
