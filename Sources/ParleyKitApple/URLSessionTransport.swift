// Apple platforms only: on Linux this file compiles to nothing (the no-Foundation check in
// scripts/test.sh exempts this target and requires this guard; see docs/sdk-swift.md).
#if canImport(Darwin)
import Foundation
import ParleyKit

/// ParleyKit's socket on `URLSessionWebSocketTask` (`ws` and `wss`). As thin as possible:
/// it moves text frames, pings and the close code; every decision is the portable core's.
public final class URLSessionTransport: ParleyTransport, @unchecked Sendable {
    private let configuration: URLSessionConfiguration

    public init(configuration: URLSessionConfiguration = .default) {
        self.configuration = configuration
    }

    public func open(url: ParleyServerURL, events: ParleySocketEvents) -> any ParleySocket {
        let socket = URLSessionSocket(events: events)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: socket, delegateQueue: queue)
        var request = URLRequest(url: URL(string: url.socketURL)!)
        request.setValue("ParleyKit", forHTTPHeaderField: "User-Agent")
        let task = session.webSocketTask(with: request)
        task.maximumMessageSize = 1 << 20
        socket.start(task, session: session)
        return socket
    }
}

/// One `URLSessionWebSocketTask`; its callbacks run on the session's serial delegate queue.
final class URLSessionSocket: NSObject, ParleySocket, URLSessionWebSocketDelegate, @unchecked Sendable {
    private let events: ParleySocketEvents
    private let lock = NSLock()
    private var task: URLSessionWebSocketTask?
    private var session: URLSession?
    private var paused = false
    private var receiving = false
    private var finished = false

    init(events: ParleySocketEvents) {
        self.events = events
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    func start(_ task: URLSessionWebSocketTask, session: URLSession) {
        locked {
            self.task = task
            self.session = session
        }
        task.resume()
    }

    func send(_ text: String) {
        locked { task }?.send(.string(text)) { [weak self] error in
            if let error { self?.finish(code: 1006, reason: error.localizedDescription) }
        }
    }

    func sendPing() {
        locked { task }?.sendPing { [weak self] error in
            if error == nil { self?.events.activity() }
        }
    }

    func close(code: Int, reason: String) {
        let task = locked { self.task }
        task?.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: code) ?? .normalClosure, reason: Data(reason.utf8))
    }

    func pauseReading() {
        locked { paused = true }
    }

    func resumeReading() {
        locked { paused = false }
        receiveNext()
    }

    /// Asks for the next message unless paused or a receive is already outstanding.
    private func receiveNext() {
        let task: URLSessionWebSocketTask? = locked {
            guard !paused, !receiving, !finished else { return nil }
            receiving = true
            return self.task
        }
        task?.receive { [weak self] result in
            guard let self else { return }
            self.locked { self.receiving = false }
            switch result {
            case .success(.string(let text)):
                self.events.received(text)
                self.receiveNext()
            case .success:
                // Parley sends text frames only; a binary one is a protocol error.
                self.close(code: 1003, reason: "binary frames are not expected")
            case .failure(let error):
                self.finish(code: self.closeCode(), reason: error.localizedDescription)
            }
        }
    }

    private func closeCode() -> Int {
        let code = locked { task?.closeCode.rawValue } ?? 0
        return code == 0 ? 1006 : code
    }

    private func finish(code: Int, reason: String) {
        let session: URLSession? = locked {
            guard !finished else { return nil }
            finished = true
            return self.session
        }
        guard let session else { return }
        events.closed(code: code, reason: reason)
        session.invalidateAndCancel()
    }

    // MARK: URLSessionWebSocketDelegate

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol negotiatedProtocol: String?) {
        events.opened()
        receiveNext()
    }

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask,
                    didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
        finish(code: closeCode.rawValue, reason: reason.map { String(decoding: $0, as: UTF8.self) } ?? "")
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        finish(code: closeCode(), reason: error?.localizedDescription ?? "closed")
    }
}

/// ParleyKit's REST requests on `URLSession`.
public struct URLSessionHTTPTransport: ParleyHTTPTransport {
    public let session: URLSession

    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func send(_ request: ParleyHTTPRequest, to server: ParleyServerURL) async throws(ParleyError) -> ParleyHTTPResponse {
        guard let url = URL(string: server.description + request.target) else { throw .invalidArgument("target \(request.target)") }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.addValue(value, forHTTPHeaderField: name) }
        if !request.body.isEmpty { urlRequest.httpBody = Data(request.body) }
        do {
            let (data, response) = try await session.data(for: urlRequest)
            return ParleyHTTPResponse(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: Array(data))
        } catch {
            throw .http(error.localizedDescription)
        }
    }
}

extension ParleyUUID {
    /// The same UUID as Foundation's (CallKit, LiveCommunicationKit).
    public var foundationUUID: UUID { UUID(uuid: bytes) }

    public init(_ uuid: UUID) {
        self.init(bytes: uuid.uuid)
    }
}

extension VoIPPushPayload {
    /// Decodes `PKPushPayload.dictionaryPayload`.
    public init?(dictionaryPayload: [AnyHashable: Any]) {
        let stringKeyed = Dictionary(uniqueKeysWithValues: dictionaryPayload.compactMap { key, value in
            (key as? String).map { ($0, value) }
        })
        guard JSONSerialization.isValidJSONObject(stringKeyed),
              let data = try? JSONSerialization.data(withJSONObject: stringKeyed) else { return nil }
        self.init(jsonText: String(decoding: data, as: UTF8.self))
    }
}
#endif
