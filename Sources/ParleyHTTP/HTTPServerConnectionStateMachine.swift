import ParleyNet

/// What a server connection's state machine asks its executor to do. Most actions need no
/// answer (`perform`); the others are methods returning what the executor got (an inline
/// handler's response, an upgrade decision). The machine owns its output (a generic parameter),
/// so the compiler specializes these calls: no action queue, no allocation per request.
protocol HTTPServerConnectionOutput {
    /// The loop's time of the current turn (the machine reads no clock).
    var now: UInt64 { get }
    /// Bytes queued on the socket and not yet written.
    var outboundBytes: Int { get }
    /// Carries out an action that needs no answer.
    mutating func perform(_ action: HTTPServerConnectionAction)
    /// Writes a `constant` route's answer and reports it (an action of its own: the hot path,
    /// passed without copying the answer).
    mutating func writeConstant(_ constant: ConstantResponse, _ write: HTTPServerConnectionAction.Write)
    /// Runs an inline handler now.
    mutating func callInline(_ handler: HTTPInlineHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPResponse
    /// Runs an inline attempt now; its responder answers `sequence`, possibly at once (`answer`).
    mutating func attemptInline(_ attempt: HTTPInlineAttempt, _ request: HTTPRequest, sequence: UInt64) -> (taken: Bool, answer: HTTPResponse?)
    /// Makes the body stream of a streaming route and starts its handler with it (its response
    /// comes back through `handlerAnswered(sequence)`).
    mutating func startStreamedHandler(
        _ handler: @escaping HTTPHandler, _ head: HTTPRequestHead, route: Route, parameters: PathParameters, sequence: UInt64
    ) -> HTTPRequestBodyStream
    /// Appends body bytes to a streamed body; true when reads must pause until its consumer catches up.
    mutating func deliver(_ chunk: UnsafeRawBufferPointer, to stream: HTTPRequestBodyStream) -> Bool
    /// Asks an upgrade route.
    mutating func upgrade(_ handler: HTTPUpgradeHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPUpgradeAction
    /// Whether `.file` bodies go out with `sendFile` (false over TLS: they stream their fallback).
    var sendsFiles: Bool { get }
    /// Sends up to `count` bytes of `region`'s file from `offset` with `sendfile(2)`.
    mutating func sendFile(_ region: FileRegion, from offset: Int, count: Int) -> FileWriteResult
}

extension HTTPServerConnectionOutput {
    var sendsFiles: Bool { false }
    mutating func sendFile(_ region: FileRegion, from offset: Int, count: Int) -> FileWriteResult { .failed }
}

/// An action of `HTTPServerConnectionStateMachine` that needs no answer.
enum HTTPServerConnectionAction {
    /// What a response write reports to the observer, and how the response is framed.
    struct Write {
        var keepAlive: Bool
        var headRequest: Bool
        /// An HTTP/1.0 stream of unknown length: sent until the connection closes.
        var closeDelimited = false
        /// The response's fields may come from the loop's cache (false for a `101` of an upgrade).
        var cachesFields = true
        let method: HTTPMethod?
        /// Unowned: routes live as long as the route table the machine holds, and a write is
        /// carried out at once.
        unowned(unsafe) let route: Route?
        let started: UInt64
    }

    /// Write the response (its head only when the body streams) and report it.
    case write(HTTPResponse, Write)
    /// Write these bytes (`100 Continue`, a framed chunk of a streamed response).
    case writeBytes([UInt8])
    /// Start an async handler; its response comes back through `handlerAnswered(sequence)`.
    case callAsync(HTTPHandler, HTTPRequest, Route, PathParameters, sequence: UInt64)
    /// The streamed request body ended.
    case finishBody(HTTPRequestBodyStream)
    /// The streamed request body stopped early.
    case failBody(HTTPRequestBodyStream, HTTPRequestBodyError)
    /// Call the streamed response's producer once; its result comes back through `responseChunk`.
    case pullResponseChunk(@Sendable () async throws -> [UInt8]?)
    /// Hand the connection to `handler`, first giving it the bytes read past the upgrade request.
    case handOver(any ConnectionHandler, leftover: [UInt8])
    case pauseReading
    case resumeReading
    /// Arm the deadline this many nanoseconds from now (the machine's `deadline` says which).
    case startDeadline(UInt64)
    /// Close the connection once queued output is written.
    case close
    /// The connection closes after this error answer (for the log).
    case closingAfter(HTTPStatus)
    /// A streamed response failed after its head went out (for the log); the connection closes.
    case responseStreamFailed(String)
}

/// What a server connection's state machine needs from the server's configuration.
struct HTTPServerConnectionConfiguration {
    var routes: RouteTable
    var parserLimits: HTTPParserLimits
    var maxBodyBytes: Int
    /// The answer to a body over its limit on a route without its own.
    var bodyTooLarge: HTTPResponse
    var maxPipelinedRequests: Int
    /// Queued output above which the next request is not read.
    var outboundHighWater: Int
    /// Queued output below which the next chunk of a streamed response is pulled.
    var streamLowWater: Int
    var idleTimeout: UInt64
    var headerTimeout: UInt64
    var bodyTimeout: UInt64
}

/// One HTTP/1.1 server connection as a sans-I/O state machine: bytes and events go in, actions
/// go out to its `Output` (write, call a handler, deliver a body chunk, pause or resume reads,
/// arm a deadline, upgrade, close). It owns the parser, the queue of requests awaiting their
/// responses (in request order, bounded by `maxPipelinedRequests`), the request whose body is
/// arriving, the input held back while reads are paused, keep-alive and the `100 Continue`
/// rule. It reads no clock and touches no socket: the time and the queued output come from
/// the output (`HTTPServerConnection`'s executor on a real connection, a recorder in tests).
///
/// A request whose response is ready when it has been read and nothing is queued before it (an
/// inline route, a 404) is answered at once, without entering the queue.
struct HTTPServerConnectionStateMachine<Output: HTTPServerConnectionOutput> {
    typealias Action = HTTPServerConnectionAction
    typealias Write = HTTPServerConnectionAction.Write

    typealias Configuration = HTTPServerConnectionConfiguration

    /// Where the connection stands as a whole.
    enum Lifecycle: Equatable {
        /// Requests are read.
        case open
        /// No more requests are read; the connection closes once the queue is written.
        case closing
        /// An upgrade was accepted: another handler owns the connection.
        case handedOver
        /// The socket closed.
        case closed
    }

    /// The deadline that applies now.
    enum Deadline: Equatable {
        /// No deadline (a handler is running, a response is being written, or the connection ends).
        case none
        /// Keep-alive wait for the next request.
        case idle
        /// A request head is arriving.
        case head
        /// A request body is arriving.
        case body
    }

    /// What a queued request is waiting for.
    enum SlotState {
        /// Its handler is running.
        case running
        case ready(HTTPResponse)
        /// The answer of a `constant` route.
        case constant(ConstantResponse)
        /// An upgrade request: its route decides once it is first in line.
        case upgrade(HTTPUpgradeHandler, HTTPRequest, Route, PathParameters)
        /// The route is deciding.
        case upgrading
        /// Its head is written and its body streams; it stays first until the stream ends.
        case streaming(OutgoingStream)
        /// Its head is written and its file region goes out with `sendFile` from `offset`.
        case sendingFile(FileRegion, offset: Int)
    }

    /// A request read completely (or refused) whose response is not written yet.
    struct Slot {
        let sequence: UInt64
        /// nil when the request line could not be parsed.
        let method: HTTPMethod?
        /// The matched route, for the observer.
        let route: Route?
        var keepAlive: Bool
        let started: UInt64
        /// The request was HTTP/1.0: a stream of unknown length is sent until the connection closes.
        var http10 = false
        var state: SlotState

        var isReady: Bool {
            switch state {
            case .ready, .constant: true
            default: false
            }
        }
    }

    /// A streamed response body being written: its producer and the machine that says when to
    /// pull it and what to write.
    struct OutgoingStream {
        let next: @Sendable () async throws -> [UInt8]?
        var machine: HTTPResponseStreamStateMachine
    }

    /// The request whose head has arrived and whose body is being read.
    struct Incoming {
        let sequence: UInt64
        var head: HTTPRequestHead
        let match: RouteMatch
        let started: UInt64
        /// The route's body limit and the answer past it.
        let limit: Int
        let tooLarge: HTTPResponse
        /// Body bytes read so far.
        var received = 0
        /// On a streaming route: the stream its running handler reads the body from.
        var stream: HTTPRequestBodyStream?
    }

    /// `100 Continue` for the request being read.
    private enum ContinueState {
        case notExpected, due, sent
    }

    let configuration: Configuration
    /// Where the actions go.
    var output: Output
    private(set) var lifecycle = Lifecycle.open
    private(set) var deadline = Deadline.none
    /// Requests read whose responses are not written yet, in request order.
    private(set) var slots: [Slot] = []
    private(set) var incoming: Incoming?
    /// Reads are paused (pipelining bound, output backlog, a streamed body's consumer behind).
    private(set) var readsPaused = false
    private var parser: HTTPRequestParser
    private var nextSequence: UInt64 = 0
    /// `nextSequence` when the idle deadline was last armed: a request since then (even one
    /// answered within the read that brought it) restarts the idle time.
    private var idleArmedAt: UInt64 = 0
    private var continueState = ContinueState.notExpected
    /// The body of the `incoming` request on a buffered route.
    private var body: [UInt8] = []
    /// Input held back while reads are paused or after an upgrade request.
    private(set) var held: [UInt8] = []
    /// Inside a parsing step: an upgrade waits until the input after its request is held.
    private var parsing = false
    private var quiescing = false
    /// The client half-closed: answer what it sent completely, then close.
    private var peerClosed = false

    init(configuration: Configuration, output: Output) {
        self.configuration = configuration
        self.output = output
        parser = HTTPRequestParser(limits: configuration.parserLimits)
        updateDeadline()
    }

    /// `parser.phase`, read from the parser's stored fields so the parser is not copied.
    private var parserPhase: HTTPRequestParser.Phase {
        HTTPRequestParser.phase(state: parser.state, inHead: parser.inHead)
    }

    private var parserUpgraded: Bool { parser.state == .upgraded }

    private var isClosing: Bool { lifecycle != .open }

    private var hasIncoming: Bool {
        if case .none = incoming { return false }
        return true
    }

    // MARK: - Events

    /// Bytes arrived.
    mutating func read(_ bytes: UnsafeRawBufferPointer) {
        guard lifecycle == .open else { return }
        if readsPaused || parserUpgraded {
            held.append(contentsOf: bytes)
            output.perform(.pauseReading)
            return
        }
        parse(bytes)
        updateDeadline()
    }

    /// The socket's queued output drained.
    mutating func outputDrained() {
        if readsPaused { resumeParsingIfPossible() }
        pullStreamIfPossible()
    }

    /// A streamed body's consumer took what was buffered: read on.
    mutating func bodyStreamDrained() {
        guard lifecycle != .closed else { return }
        resumeParsingIfPossible()
    }

    /// The client half-closed the connection.
    mutating func peerClosedInput() {
        guard lifecycle != .closed else { return }
        peerClosed = true
        // Requests still held back (pipelining bound) are answered first.
        if !readsPaused { finishAfterPeerClosed() }
    }

    /// The server is shutting down: finish the request arriving, then close.
    mutating func quiesce() {
        guard lifecycle != .closed else { return }
        quiescing = true
        switch parserPhase {
        case .head, .body:
            // A request is arriving: let it finish (its deadline still applies); it will be the last.
            return
        default:
            stopReading()
            if slots.isEmpty {
                output.perform(.close)
            } else {
                writeReadyResponses()
            }
            updateDeadline()
        }
    }

    /// The socket closed.
    mutating func connectionClosed() {
        lifecycle = .closed
        slots.removeAll()
        dropIncoming(.incomplete)
        held = []
        deadline = .none
    }

    /// The deadline armed last passed.
    mutating func deadlinePassed() {
        guard deadline != .none, lifecycle != .closed else { return }
        let kind = deadline
        deadline = .none
        switch kind {
        case .idle:
            stopReading()
            output.perform(.close)
        case .head, .body:
            fail(with: .plain(.requestTimeout), streamError: .timedOut)
        case .none:
            break
        }
    }

    /// The handler of request `sequence` answered (an async handler, or a responder later).
    mutating func handlerAnswered(_ sequence: UInt64, _ response: HTTPResponse) {
        guard lifecycle != .closed, !slots.isEmpty, sequence >= slots[0].sequence else { return }
        if let current = incoming, current.sequence == sequence {
            // A streaming handler answered before its body ended: the rest is not read.
            incoming = nil
            if let stream = current.stream { output.perform(.failBody(stream, .abandoned)) }
            stopReading()
            continueState = .notExpected
            readsPaused = false
            held = []
            output.perform(.pauseReading)
        }
        let index = Int(sequence - slots[0].sequence)
        guard index < slots.count, slots[index].sequence == sequence, case .running = slots[index].state else { return }
        guard index == 0 else {
            slots[index].state = .ready(response)
            return
        }
        // The front of the queue: written without storing the response in its slot, then
        // whatever became ready behind it.
        let first = removeFirstSlot()
        guard send(response, first) else {
            finishWriting()
            return
        }
        writeReadyResponses()
    }

    /// A chunk (nil: the end) or an error of the streamed response first in the queue.
    mutating func responseChunk(_ result: Result<[UInt8]?, any Error>) {
        guard lifecycle != .closed, !slots.isEmpty, case .streaming(var stream) = slots[0].state else { return }
        let action: HTTPResponseStreamStateMachine.Action
        switch result {
        case .success(let chunk): action = stream.machine.received(chunk)
        case .failure(let error): action = stream.machine.failed(error)
        }
        slots[0].state = .streaming(stream)
        perform(action)
    }

    // MARK: - Reading

    private mutating func parse(_ input: UnsafeRawBufferPointer) {
        parseEvents(input)
        // An upgrade request may be at the front of the queue now that its leftover bytes are held.
        if parserUpgraded { writeReadyResponses() }
    }

    private mutating func parseEvents(_ input: UnsafeRawBufferPointer) {
        parsing = true
        defer { parsing = false }
        var offset = 0
        do {
            while lifecycle == .open {
                if parserPhase == .idle && mustPauseBeforeNextRequest() {
                    held.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                    readsPaused = true
                    output.perform(.pauseReading)
                    return
                }
                let (step, consumed) = try parser.advance(in: UnsafeRawBufferPointer(rebasing: input[offset...]))
                offset += consumed
                switch step {
                case .needMore:
                    if parserUpgraded {
                        held.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                        output.perform(.pauseReading)
                    }
                    return
                case .head:
                    let completed = parser.completedHead()
                    // The router, not the parser, picks the route: from the path bytes still in the parser.
                    let routes = configuration.routes
                    let match = parser.withCompletedPath { routes.match(completed.method, rawPath: $0) }
                    guard !completed.hasBody else {
                        receivedHead(parser.takeHead(), match: match)
                        continue
                    }
                    // Complete already: the parser's `.end` follows without using any input.
                    if case .found(let route, _) = match, let constant = route.constant {
                        // The head itself is not needed: no request value is made.
                        parser.discardHead()
                        try expectEnd(UnsafeRawBufferPointer(rebasing: input[offset...]))
                        answer(constant, route: route, method: completed.method, keepAlive: completed.keepAlive,
                               isUpgrade: completed.isUpgrade, sequence: takeSequence())
                        continue
                    }
                    let head = parser.takeHead()
                    try expectEnd(UnsafeRawBufferPointer(rebasing: input[offset...]))
                    received(head, body: [], match: match, sequence: takeSequence(), started: output.now)
                case .body(let chunk):
                    if receivedBody(chunk) {
                        // A streamed body's consumer is behind: read on once it has caught up.
                        held.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                        readsPaused = true
                        output.perform(.pauseReading)
                        return
                    }
                case .end:
                    receivedEnd()
                }
            }
        } catch {
            if error == .bodyTooLarge, let current = incoming {
                fail(with: current.tooLarge, streamError: .tooLarge(limit: current.limit))
            } else {
                fail(with: .plain(error.status, error.description), streamError: .malformed(error))
            }
        }
    }

    private func mustPauseBeforeNextRequest() -> Bool {
        slots.count >= configuration.maxPipelinedRequests || output.outboundBytes > configuration.outboundHighWater
    }

    private mutating func resumeParsingIfPossible() {
        guard readsPaused, !parsing, lifecycle == .open, !mustPauseBeforeNextRequest(),
              !(incoming?.stream?.isHoldingReads ?? false) else { return }
        readsPaused = false
        let input = held
        held = []
        // Parsed even when empty: a body that ended with the read that paused ends now.
        input.withUnsafeBytes { parse($0) }
        if peerClosed, !readsPaused, lifecycle != .closed {
            finishAfterPeerClosed()
            return
        }
        if !readsPaused, lifecycle == .open, !parserUpgraded {
            output.perform(.resumeReading)
        }
        updateDeadline()
    }

    /// Takes the `.end` that follows a bodiless head (it uses no input).
    private mutating func expectEnd(_ input: UnsafeRawBufferPointer) throws(HTTPParserError) {
        guard case (.end, 0) = try parser.advance(in: input) else {
            preconditionFailure("HTTPServerConnectionStateMachine: a bodiless head not followed by its end")
        }
    }

    private mutating func takeSequence() -> UInt64 {
        defer { nextSequence &+= 1 }
        return nextSequence
    }

    private mutating func stopReading() {
        if lifecycle == .open { lifecycle = .closing }
    }

    /// A head with a body: the body is read next (on a streaming route, while its handler runs).
    private mutating func receivedHead(_ head: HTTPRequestHead, match: RouteMatch) {
        let sequence = takeSequence()
        let started = output.now
        var route: Route?
        if case .found(let found, _) = match { route = found }
        let limit = route?.bodyLimit ?? configuration.maxBodyBytes
        let tooLarge = route?.bodyTooLarge ?? configuration.bodyTooLarge
        if case .contentLength(let length) = head.bodyFraming, length > limit {
            // 413 before any body byte; the body is never read.
            stopReading()
            output.perform(.pauseReading)
            enqueue(Slot(sequence: sequence, method: head.method, route: route, keepAlive: false, started: started, state: .ready(tooLarge)))
            return
        }
        if head.expectContinue && head.hasBody {
            guard case .found = match else {
                // 404/405 before the body: answer now, never read the body, close.
                stopReading()
                enqueue(Slot(
                    sequence: sequence, method: head.method, route: nil, keepAlive: false, started: started,
                    state: .ready(Self.responseForUnrouted(match))))
                return
            }
        }
        if case .contentLength(let length) = head.bodyFraming, length > 0 {
            body.reserveCapacity(min(length, 64 << 10))
        }
        parser.limitBody(to: limit)
        incoming = Incoming(sequence: sequence, head: head, match: match, started: started, limit: limit, tooLarge: tooLarge)
        if case .found(let route, let parameters) = match, route.streamsBody {
            switch route.handler {
            case .async(let handler), .inlineFirst(_, let handler):
                // The handler starts as soon as the head is read; its slot keeps its place in line.
                slots.append(Slot(
                    sequence: sequence, method: head.method, route: route, keepAlive: head.keepAlive, started: started,
                    http10: head.version == .http1_0, state: .running))
                incoming?.stream = output.startStreamedHandler(handler, head, route: route, parameters: parameters, sequence: sequence)
            case .inline, .upgrade:
                break
            }
        }
        if head.expectContinue && head.hasBody {
            continueState = .due
            sendContinueIfNeeded()
        } else {
            continueState = .notExpected
        }
    }

    /// Body bytes of the `incoming` request; returns true when reading must pause (a streamed
    /// body's consumer is behind).
    private mutating func receivedBody(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard let current = incoming else { return false }
        let received = current.received + chunk.count
        guard received <= current.limit else {
            fail(with: current.tooLarge, streamError: .tooLarge(limit: current.limit))
            return false
        }
        incoming?.received = received
        if let stream = current.stream { return !chunk.isEmpty && output.deliver(chunk, to: stream) }
        body.append(contentsOf: chunk)
        return false
    }

    /// Forgets the request being read; a streamed body's handler learns why through its stream.
    private mutating func dropIncoming(_ reason: HTTPRequestBodyError) {
        if let stream = incoming.take()?.stream { output.perform(.failBody(stream, reason)) }
    }

    /// The body of the `incoming` request is complete.
    private mutating func receivedEnd() {
        guard let request = incoming.take() else { return }
        continueState = .notExpected
        if let stream = request.stream {
            // Its handler is running already; the slot is in line.
            output.perform(.finishBody(stream))
            if !request.head.keepAlive || quiescing { stopReading() }
            return
        }
        let requestBody = body
        body = []
        received(request.head, body: requestBody, match: request.match, sequence: request.sequence, started: request.started)
    }

    /// A half-closed client may still read: answer every complete request, drop a partial one.
    private mutating func finishAfterPeerClosed() {
        dropIncoming(.incomplete)
        body = []
        stopReading()
        if slots.isEmpty {
            output.perform(.close)
        } else {
            writeReadyResponses()
        }
        updateDeadline()
    }

    /// A request was read completely: answer it (inline, 404/405), start its handler, or hold its upgrade.
    private mutating func received(
        _ head: consuming HTTPRequestHead, body requestBody: [UInt8], match: RouteMatch, sequence: UInt64, started: UInt64
    ) {
        if !head.keepAlive || quiescing { stopReading() }
        if head.isUpgrade {
            // The parser has stopped: unless a route takes the connection over, close after answering.
            if case .found(let route, _) = match, case .upgrade = route.handler {} else { stopReading() }
        }
        let method = head.method
        let keepAlive = head.keepAlive
        let http10 = head.version == .http1_0
        switch match {
        case .notFound, .methodNotAllowed:
            answer(Self.responseForUnrouted(match), sequence: sequence, method: method, route: nil, keepAlive: keepAlive, started: started)
        case .found(let route, _) where route.constant != nil:
            enqueue(Slot(
                sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, state: .constant(route.constant!)))
        case .found(let route, let parameters):
            switch route.handler {
            case .inlineFirst(let attempt, let handler):
                let request = HTTPRequest(head: head, body: requestBody, parameters: parameters)
                let (taken, immediate) = output.attemptInline(attempt, request, sequence: sequence)
                if let immediate {
                    answer(immediate, sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10)
                } else {
                    slots.append(Slot(
                        sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10,
                        state: .running))
                }
                if taken {
                    parser.reuseHeadMemory(of: request)
                } else {
                    output.perform(.callAsync(handler, request, route, parameters, sequence: sequence))
                }
            case .inline(let handler):
                let request = HTTPRequest(head: head, body: requestBody, parameters: parameters)
                let response = output.callInline(handler, request, route: route, parameters: parameters)
                parser.reuseHeadMemory(of: request)
                answer(response, sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10)
            case .async(let handler):
                enqueue(Slot(
                    sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10,
                    state: .running))
                let bodyStream: HTTPRequestBodyStream? = route.streamsBody ? .empty() : nil
                output.perform(.callAsync(
                    handler, HTTPRequest(head: head, body: requestBody, parameters: parameters, bodyStream: bodyStream), route, parameters,
                    sequence: sequence))
            case .upgrade(let handler):
                var slot = Slot(sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, state: .running)
                if head.isUpgrade {
                    slot.state = .upgrade(handler, HTTPRequest(head: head, body: requestBody, parameters: parameters), route, parameters)
                } else {
                    var response = HTTPResponse.plain(.init(426), "Upgrade Required")
                    response.headers.add("Connection", "Upgrade")
                    slot.state = .ready(response)
                }
                enqueue(slot)
            }
        }
    }

    /// A bodiless request for a `constant` route, answered without building its head: the same
    /// steps as `received` for an inline route.
    private mutating func answer(
        _ constant: ConstantResponse, route: Route, method: HTTPMethod, keepAlive: Bool, isUpgrade: Bool, sequence: UInt64
    ) {
        // An inline route never takes an upgrade over: close after answering, like `received`.
        if !keepAlive || quiescing || isUpgrade { stopReading() }
        let started = output.now
        guard slots.isEmpty else {
            slots.append(Slot(sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, state: .constant(constant)))
            return
        }
        // What `enqueue` and `send` do with a slot, without making one.
        _ = send(constant, method: method, route: route, keepAlive: keepAlive, started: started)
        finishWriting()
    }

    /// A request answered at once: written now when nothing precedes it, else queued ready.
    private mutating func answer(
        _ response: HTTPResponse, sequence: UInt64, method: HTTPMethod, route: Route?, keepAlive: Bool, started: UInt64, http10: Bool = false
    ) {
        let slot = Slot(
            sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10,
            state: .ready(response))
        guard slots.isEmpty else {
            slots.append(slot)
            return
        }
        _ = send(response, slot)
        finishWriting()
    }

    /// Queues a read request; one whose response is ready and that nothing precedes is written now.
    private mutating func enqueue(_ slot: Slot) {
        guard slots.isEmpty, slot.isReady else {
            slots.append(slot)
            return
        }
        _ = send(slot)
        finishWriting()
    }

    private static func responseForUnrouted(_ match: RouteMatch) -> HTTPResponse {
        if case .methodNotAllowed(let allowed) = match {
            var response = HTTPResponse.plain(.methodNotAllowed)
            response.headers.add("Allow", allowed.map(\.rawValue).joined(separator: ", "))
            return response
        }
        return .plain(.notFound)
    }

    /// Answers with `response` after what is queued, then closes: parse errors, bodies over
    /// their limit and timeouts. A streamed body's handler is answering already: its stream
    /// fails with `streamError` and its own answer is the last.
    private mutating func fail(with response: HTTPResponse, streamError: HTTPRequestBodyError) {
        guard lifecycle != .closed else { return }
        stopReading()
        readsPaused = false
        held = []
        output.perform(.pauseReading)
        if let stream = incoming?.stream {
            incoming = nil
            output.perform(.failBody(stream, streamError))
        } else if let request = incoming.take() {
            body = []
            slots.append(Slot(
                sequence: request.sequence, method: request.head.method, route: nil, keepAlive: false, started: request.started,
                state: .ready(response)))
        } else {
            slots.append(Slot(sequence: nextSequence, method: nil, route: nil, keepAlive: false, started: output.now, state: .ready(response)))
            nextSequence &+= 1
        }
        output.perform(.closingAfter(response.status))
        writeReadyResponses()
        updateDeadline()
    }

    // MARK: - Writing

    /// Writes the responses at the front of the queue that are ready, in request order.
    private mutating func writeReadyResponses() {
        while lifecycle != .closed, !slots.isEmpty {
            switch slots[0].state {
            case .upgrade:
                if parsing { return }
                performUpgrade()
                return
            case .upgrading, .streaming, .sendingFile, .running:
                finishWriting()
                return
            case .ready, .constant:
                let slot = removeFirstSlot()
                guard send(slot) else {
                    finishWriting()
                    return
                }
            }
        }
        finishWriting()
    }

    /// Takes the front of the queue; the only slot (the usual case) is taken from the end, which
    /// moves no other slot.
    private mutating func removeFirstSlot() -> Slot {
        slots.count == 1 ? slots.removeLast() : slots.removeFirst()
    }

    /// Writes the response of `slot`, which was at the front of the queue (and is out of it now);
    /// returns false when the connection closes after it.
    private mutating func send(_ slot: Slot) -> Bool {
        switch slot.state {
        case .constant(let constant):
            return send(constant, method: slot.method, route: slot.route, keepAlive: slot.keepAlive, started: slot.started)
        case .ready(let response):
            return send(response, slot)
        default:
            preconditionFailure("HTTPServerConnectionStateMachine: sending a slot without response")
        }
    }

    /// `send` for a request answered by `response`; a streamed body starts here and nothing else
    /// is written until it ends (false is returned then, with the stream's slot first in the queue).
    private mutating func send(_ response: HTTPResponse, _ slot: Slot) -> Bool {
        let last = slots.isEmpty && !hasIncoming
        let asksToClose = response.headers.containsToken("close", inField: "connection")
        var write = Write(
            keepAlive: slot.keepAlive && !(isClosing && last) && !asksToClose, headRequest: slot.method == .head, method: slot.method,
            route: slot.route, started: slot.started)
        if case .file(let region, let fallback) = response.body, response.status.allowsContent {
            guard output.sendsFiles else {
                var streamed = response
                streamed.body = .stream(length: region.range.count, next: fallback)
                return send(streamed, slot)
            }
            output.perform(.write(response, write))
            guard slot.method != .head, !region.range.isEmpty else { return sent(keepAlive: write.keepAlive) }
            var sending = slot
            sending.keepAlive = write.keepAlive
            sending.state = .sendingFile(region, offset: region.range.lowerBound)
            slots.insert(sending, at: 0)
            pullStreamIfPossible()
            return false
        }
        if case .stream(let length, let next) = response.body, response.status.allowsContent {
            write.closeDelimited = length == nil && slot.http10
            if write.closeDelimited { write.keepAlive = false }
            output.perform(.write(response, write))
            guard slot.method != .head, length != 0 else { return sent(keepAlive: write.keepAlive) }
            var streaming = slot
            streaming.keepAlive = write.keepAlive
            streaming.state = .streaming(OutgoingStream(
                next: next, machine: HTTPResponseStreamStateMachine(length: length, closeDelimited: write.closeDelimited)))
            slots.insert(streaming, at: 0)
            pullStreamIfPossible()
            return false
        }
        output.perform(.write(response, write))
        return sent(keepAlive: write.keepAlive)
    }

    /// `send` for a `constant` route's answer.
    private mutating func send(_ constant: ConstantResponse, method: HTTPMethod?, route: Route?, keepAlive requested: Bool, started: UInt64) -> Bool {
        let last = slots.isEmpty && !hasIncoming
        let keepAlive = requested && !(isClosing && last) && !constant.asksToClose
        output.writeConstant(constant, Write(keepAlive: keepAlive, headRequest: method == .head, method: method, route: route, started: started))
        return sent(keepAlive: keepAlive)
    }

    /// After a response went out: closes after a last one, else sends a `100 Continue` now due.
    private mutating func sent(keepAlive: Bool) -> Bool {
        if !keepAlive {
            stopReading()
            slots.removeAll()
            dropIncoming(.abandoned)
            return false
        }
        sendContinueIfNeeded()
        return true
    }

    /// After responses were written: closes a finished connection, resumes paused parsing.
    private mutating func finishWriting() {
        guard lifecycle != .closed else { return }
        if slots.isEmpty && isClosing {
            if lifecycle == .closing { output.perform(.close) }
            return
        }
        if readsPaused { resumeParsingIfPossible() }
        updateDeadline()
    }

    /// Sends `100 Continue` once the request being read is the first without a response.
    private mutating func sendContinueIfNeeded() {
        guard continueState == .due, lifecycle == .open, let current = incoming, slots.isEmpty || slots[0].sequence == current.sequence
        else { return }
        continueState = .sent
        output.perform(.writeBytes(HTTPResponseSerializer.continueResponse))
    }

    /// The upgrade request first in line: its route decides (a 503 while shutting down).
    private mutating func performUpgrade() {
        guard case .upgrade(let handler, let request, let route, let parameters) = slots[0].state else { return }
        slots[0].state = .upgrading
        let first = slots[0]
        let decision = quiescing
            ? .reject(.plain(.serviceUnavailable, "Shutting down"))
            : output.upgrade(handler, request, route: route, parameters: parameters)
        switch decision {
        case .accept(let response, let handler):
            slots.removeAll()
            lifecycle = .handedOver
            deadline = .none
            output.perform(.write(response, Write(
                keepAlive: true, headRequest: false, cachesFields: false, method: first.method, route: first.route, started: first.started)))
            let leftover = held
            held = []
            output.perform(.handOver(handler, leftover: leftover))
        case .reject(let response):
            slots[0].state = .ready(response)
            slots[0].keepAlive = false
            writeReadyResponses()
        }
    }

    // MARK: - Streamed responses

    /// Asks the stream first in the queue for its next chunk when its machine says so (room in
    /// the output queue, no pull in flight).
    private mutating func pullStreamIfPossible() {
        if !slots.isEmpty, case .sendingFile = slots[0].state { return sendFileIfPossible() }
        guard lifecycle != .closed, !slots.isEmpty, case .streaming(var stream) = slots[0].state else { return }
        let action = stream.machine.outputQueued(output.outboundBytes, lowWater: configuration.streamLowWater)
        slots[0].state = .streaming(stream)
        perform(action)
    }

    /// Bytes offered to one `sendFile` call.
    static var sendFileChunk: Int { 1 << 20 }

    /// Sends the file region first in the queue while the socket takes it; a drain calls again.
    private mutating func sendFileIfPossible() {
        while lifecycle != .closed, !slots.isEmpty, case .sendingFile(let region, let offset) = slots[0].state {
            let remaining = region.range.upperBound - offset
            if remaining == 0 {
                let slot = removeFirstSlot()
                if sent(keepAlive: slot.keepAlive) {
                    writeReadyResponses()
                } else {
                    finishWriting()
                }
                return
            }
            let count = min(remaining, Self.sendFileChunk)
            switch output.sendFile(region, from: offset, count: count) {
            case .wrote(let written):
                slots[0].state = .sendingFile(region, offset: offset + written)
                if written < count { return }
            case .endOfFile:
                return perform(.abort("the file ended \(remaining) bytes short of its Content-Length"))
            case .failed:
                return
            }
        }
    }

    /// Executes what the stream's machine decided.
    private mutating func perform(_ action: HTTPResponseStreamStateMachine.Action) {
        switch action {
        case .wait:
            return
        case .pull:
            guard case .streaming(let stream) = slots[0].state else { return }
            output.perform(.pullResponseChunk(stream.next))
        case .write(let bytes):
            output.perform(.writeBytes(bytes))
            pullStreamIfPossible()
        case .finish(let bytes):
            output.perform(.writeBytes(bytes))
            let slot = removeFirstSlot()
            if sent(keepAlive: slot.keepAlive) {
                writeReadyResponses()
            } else {
                finishWriting()
            }
        case .abort(let reason):
            // The head went out: the client can only learn it from the connection closing.
            output.perform(.responseStreamFailed(reason))
            stopReading()
            slots.removeAll()
            incoming = nil
            output.perform(.close)
        }
    }

    // MARK: - Deadlines

    private mutating func updateDeadline() {
        let wanted: Deadline
        switch lifecycle {
        case .closed, .handedOver:
            wanted = .none
        case .open, .closing:
            switch parserPhase {
            case .head: wanted = isClosing ? .none : .head
            case .body: wanted = hasIncoming && !isClosing ? .body : .none
            case .idle: wanted = slots.isEmpty && !isClosing ? .idle : .none
            default: wanted = .none
            }
        }
        guard wanted != deadline || (wanted == .idle && idleArmedAt != nextSequence) else { return }
        deadline = wanted
        switch wanted {
        case .none: return
        case .idle:
            idleArmedAt = nextSequence
            output.perform(.startDeadline(configuration.idleTimeout))
        case .head: output.perform(.startDeadline(configuration.headerTimeout))
        case .body: output.perform(.startDeadline(configuration.bodyTimeout))
        }
    }
}
