/// The body of one streamed response as a sans-I/O state machine: the connection reports what
/// happens (room in its output queue, a chunk, the end, an error) and gets back what to do
/// (pull the next chunk, write bytes, finish, abort).
///
/// It enforces the rules of `HTTPResponseBody.stream`: at most one `next()` in flight, a pull
/// only while the queued output is under the low-water mark, a body exactly `length` long when
/// the length was announced, chunked framing when not (unless close-delimited).
struct HTTPResponseStreamStateMachine {
    /// How the body is delimited on the wire.
    enum Framing: Equatable {
        /// `Content-Length` was sent: exactly this many bytes are still due.
        case length(Int)
        /// `Transfer-Encoding: chunked`: each chunk framed, a last chunk at the end.
        case chunked
        /// HTTP/1.0 without a length: raw bytes until the connection closes.
        case closeDelimited
    }

    enum State: Equatable {
        /// Waiting for room in the output queue before pulling.
        case idle(Framing)
        /// A `next()` call is in flight.
        case pulling(Framing)
        /// The body ended as announced.
        case finished
        /// The body cannot be completed; the connection must close.
        case failed(String)
    }

    enum Action: Equatable {
        /// Call `next()` (once).
        case pull
        /// Queue these bytes (already framed).
        case write([UInt8])
        /// The body is complete after `bytes` (the last chunk, or nothing): the response is done.
        case finish(bytes: [UInt8])
        /// Close the connection: the client learns from the truncated body.
        case abort(String)
        /// Nothing to do now.
        case wait
    }

    private(set) var state: State

    init(length: Int?, closeDelimited: Bool) {
        if let length {
            state = .idle(.length(length))
        } else {
            state = .idle(closeDelimited ? .closeDelimited : .chunked)
        }
    }

    /// The output queue holds `queuedBytes` (after a write, or when it drained).
    mutating func outputQueued(_ queuedBytes: Int, lowWater: Int) -> Action {
        guard case .idle(let framing) = state, queuedBytes < lowWater else { return .wait }
        state = .pulling(framing)
        return .pull
    }

    /// `next()` returned `chunk` (nil: the end).
    mutating func received(_ chunk: [UInt8]?) -> Action {
        guard case .pulling(let framing) = state else { return .wait }
        guard let chunk else {
            switch framing {
            case .length(let remaining) where remaining != 0:
                return fail("stream ended \(remaining) bytes short of its Content-Length")
            case .chunked:
                state = .finished
                return .finish(bytes: HTTPResponseSerializer.lastChunk)
            case .length, .closeDelimited:
                state = .finished
                return .finish(bytes: [])
            }
        }
        switch framing {
        case .length(let remaining):
            guard chunk.count <= remaining else { return fail("stream longer than its Content-Length") }
            state = .idle(.length(remaining - chunk.count))
            return .write(chunk)
        case .chunked:
            state = .idle(.chunked)
            return .write(HTTPResponseSerializer.chunk(chunk))
        case .closeDelimited:
            state = .idle(.closeDelimited)
            return .write(chunk)
        }
    }

    /// `next()` threw.
    mutating func failed(_ error: any Error) -> Action {
        guard case .pulling = state else { return .wait }
        return fail("\(error)")
    }

    private mutating func fail(_ reason: String) -> Action {
        state = .failed(reason)
        return .abort(reason)
    }
}
