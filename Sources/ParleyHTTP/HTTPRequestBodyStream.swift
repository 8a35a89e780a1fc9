import Synchronization

/// Why a streamed request body stopped before its end.
public enum HTTPRequestBodyError: HTTPResponseError, Equatable {
    /// More bytes than the route's limit.
    case tooLarge(limit: Int)
    /// Invalid framing (a malformed chunk).
    case malformed(HTTPParserError)
    /// The body deadline passed.
    case timedOut
    /// The client closed or half-closed the connection before the body ended.
    case incomplete
    /// The response went out before the body was read; the rest is not read.
    case abandoned

    public func response() -> HTTPResponse {
        switch self {
        case .tooLarge: .plain(.contentTooLarge)
        case .malformed(let error): .plain(error.status, error.description)
        case .timedOut: .plain(.requestTimeout)
        case .incomplete, .abandoned: .plain(.badRequest, "request body incomplete")
        }
    }
}

/// A request body handed to the handler chunk by chunk as it arrives (`HTTPBodyMode.streamed`).
///
/// The connection appends what it reads; while more than `highWater` bytes wait unconsumed it
/// stops reading the socket, and it resumes once `next()` has taken them. One consumer at a time.
public final class HTTPRequestBodyStream: Sendable {
    /// Unconsumed bytes past which the connection stops reading.
    public static let highWater = 256 << 10

    private struct State {
        var chunks: [[UInt8]] = []
        var head = 0
        var buffered = 0
        var finished = false
        var failure: HTTPRequestBodyError?
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
        /// The connection stopped reading because of this stream.
        var holdingReads = false
    }

    private let state = Mutex(State())
    /// Called (from the consumer's thread) when the connection may read again.
    private let resumeReading: @Sendable () -> Void

    init(resumeReading: @escaping @Sendable () -> Void) {
        self.resumeReading = resumeReading
    }

    /// A stream that has already ended with no bytes (a bodiless request to a streaming route).
    static func empty() -> HTTPRequestBodyStream {
        let stream = HTTPRequestBodyStream(resumeReading: {})
        stream.finish()
        return stream
    }

    /// The next chunk of the body, nil at its end; throws `HTTPRequestBodyError` if it stopped early.
    public func next() async throws -> [UInt8]? {
        let immediate: Answer = state.withLock { state in
            if state.head < state.chunks.count { return Self.take(&state) }
            if let failure = state.failure { return .failure(failure) }
            if state.finished { return .chunk(nil, resume: false) }
            return .wait
        }
        switch immediate {
        case .chunk(let chunk, let resume):
            if resume { resumeReading() }
            return chunk
        case .failure(let error):
            throw error
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let now: Answer? = state.withLock { state in
                    if state.head < state.chunks.count { return Self.take(&state) }
                    if let failure = state.failure { return .failure(failure) }
                    if state.finished { return .chunk(nil, resume: false) }
                    precondition(state.waiter == nil, "HTTPRequestBodyStream: next() called concurrently")
                    state.waiter = continuation
                    return nil
                }
                switch now {
                case .chunk(let chunk, let resume)?:
                    if resume { resumeReading() }
                    continuation.resume(returning: chunk)
                case .failure(let error)?:
                    continuation.resume(throwing: error)
                case .wait?, nil:
                    break
                }
            }
        }
    }

    private enum Answer { case chunk([UInt8]?, resume: Bool), failure(HTTPRequestBodyError), wait }

    private static func take(_ state: inout State) -> Answer {
        let chunk = state.chunks[state.head]
        state.chunks[state.head] = []
        state.head += 1
        if state.head == state.chunks.count {
            state.chunks.removeAll(keepingCapacity: true)
            state.head = 0
        }
        state.buffered -= chunk.count
        var resume = false
        if state.holdingReads && state.buffered <= highWater / 2 {
            state.holdingReads = false
            resume = true
        }
        return .chunk(chunk, resume: resume)
    }

    /// Whether the connection stopped reading until `next()` takes what is buffered.
    var isHoldingReads: Bool { state.withLock { $0.holdingReads } }

    /// Bytes read from the socket and not yet taken by `next()`.
    public var bufferedBytes: Int { state.withLock { $0.buffered } }

    /// Appends body bytes (connection side); returns true when the connection must stop reading
    /// until `resumeReading` is called.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return false }
        let chunk = Array(bytes)
        let (waiter, hold): (CheckedContinuation<[UInt8]?, any Error>?, Bool) = state.withLock { state in
            guard state.failure == nil, !state.finished else { return (nil, false) }
            if let waiter = state.waiter.take() { return (waiter, false) }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            if state.buffered > Self.highWater { state.holdingReads = true }
            return (nil, state.holdingReads)
        }
        waiter?.resume(returning: chunk)
        return hold
    }

    /// The body ended (connection side).
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            guard state.failure == nil else { return nil }
            state.finished = true
            return state.waiter.take()
        }
        waiter?.resume(returning: nil)
    }

    /// The body stopped early (connection side); bytes already buffered are still delivered first.
    func fail(_ error: HTTPRequestBodyError) {
        let waiter = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            guard !state.finished, state.failure == nil else { return nil }
            state.failure = error
            return state.waiter.take()
        }
        waiter?.resume(throwing: error)
    }
}
