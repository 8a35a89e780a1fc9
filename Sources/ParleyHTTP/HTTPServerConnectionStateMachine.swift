import ParleyNet

/// One HTTP/1.1 server connection as a sans-I/O state machine: bytes and events go in, actions
/// come out (write, call a handler, deliver a body chunk, pause or resume reads, arm a deadline,
/// upgrade, close). It owns the parser, the queue of requests awaiting their responses (in request
/// order, bounded by `maxPipelinedRequests`), the request whose body is arriving, the input held
/// back while reads are paused, keep-alive and the `100 Continue` rule. It reads no clock and
/// touches no socket: the executor (`HTTPServerConnection`) passes the loop's time and the queued
/// output with each `next` call and reports what its actions returned.
///
/// Protocol: after an event (or on reading bytes), call `next` until it returns nil, running each
/// action before asking for the next. An action that asks for an answer (`callInline`,
/// `attemptInline`, `startStreamedHandler`, `deliverBody`, `upgrade`) must be answered with its
/// event (`inlineAnswered`, `attemptFinished`, `bodyStreamCreated`, `bodyDelivered`,
/// `upgradeDecided`) before `next` is called again.
struct HTTPServerConnectionStateMachine {
    /// What the machine needs from the server's configuration.
    struct Configuration {
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

    /// What a response write reports to the observer, and how the response is framed.
    struct Write {
        var keepAlive: Bool
        var headRequest: Bool
        /// An HTTP/1.0 stream of unknown length: sent until the connection closes.
        var closeDelimited = false
        /// The response's fields may come from the loop's cache (false for a `101` of an upgrade).
        var cachesFields = true
        let method: HTTPMethod?
        let route: Route?
        let started: UInt64
    }

    /// What the executor must do, in order. Cases carrying a request or response are boxed, so
    /// that the action (moved a few times per request) stays a few words long.
    enum Action {
        /// Write the response (its head only when the body streams) and report it.
        indirect case write(HTTPResponse, Write)
        /// Write a `constant` route's answer and report it.
        case writeConstant(ConstantResponse, Write)
        /// Write these bytes (`100 Continue`, a framed chunk of a streamed response).
        case writeBytes([UInt8])
        /// Run an inline handler now; answer with `inlineAnswered`.
        indirect case callInline(HTTPInlineHandler, HTTPRequest, Route, PathParameters)
        /// Run an inline attempt now (its responder answers `sequence`); answer with `attemptFinished`.
        indirect case attemptInline(HTTPInlineAttempt, HTTPRequest, sequence: UInt64)
        /// Start an async handler; its response comes back through `handlerAnswered(sequence)`.
        indirect case callAsync(HTTPHandler, HTTPRequest, Route, PathParameters, sequence: UInt64)
        /// Make the body stream of a streaming route (answer with `bodyStreamCreated`), then start
        /// its handler with it, as for `callAsync`.
        indirect case startStreamedHandler(HTTPHandler, HTTPRequestHead, Route, PathParameters, sequence: UInt64)
        /// Append these body bytes to the stream; answer with `bodyDelivered` and what `append` returned.
        case deliverBody(HTTPRequestBodyStream, [UInt8])
        /// The streamed body ended.
        case finishBody(HTTPRequestBodyStream)
        /// The streamed body stopped early.
        case failBody(HTTPRequestBodyStream, HTTPRequestBodyError)
        /// Call the streamed response's producer once; report with `responseChunk`.
        case pullResponseChunk(@Sendable () async throws -> [UInt8]?)
        /// Ask the upgrade route; answer with `upgradeDecided`.
        indirect case upgrade(HTTPUpgradeHandler, HTTPRequest, Route, PathParameters)
        /// Hand the connection to `handler`, first giving it the bytes read past the upgrade request.
        case handOver(any ConnectionHandler, leftover: [UInt8])
        case pauseReading
        case resumeReading
        /// Arm the deadline this many nanoseconds from now (`deadline` says which).
        case startDeadline(UInt64)
        /// Close the connection once queued output is written.
        case close
        /// The connection closes after this error answer (for the log).
        case closingAfter(HTTPStatus)
        /// A streamed response failed after its head went out (for the log); the connection closes.
        case responseStreamFailed(String)
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
        /// The route is deciding (`upgrade` was emitted).
        case upgrading
        /// Its head is written and its body streams; it stays first until the stream ends.
        case streaming(OutgoingStream)
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

    /// A synchronous call the machine waits on (an inline handler or attempt).
    private struct PendingCall {
        let sequence: UInt64
        let method: HTTPMethod
        let route: Route
        let parameters: PathParameters
        let keepAlive: Bool
        let started: UInt64
        let http10: Bool
        /// The async handler an attempt falls back to.
        let fallback: HTTPHandler?
    }

    /// `100 Continue` for the request being read.
    private enum ContinueState {
        case notExpected, due, sent
    }

    let configuration: Configuration
    private(set) var lifecycle = Lifecycle.open
    private(set) var deadline = Deadline.none
    /// Requests read whose responses are not written yet, in request order.
    private(set) var slots: [Slot] = []
    private(set) var incoming: Incoming?
    /// Reads are paused (pipelining bound, output backlog, a streamed body's consumer behind).
    private(set) var readsPaused = false
    private var parser: HTTPRequestParser
    private var nextSequence: UInt64 = 0
    private var continueState = ContinueState.notExpected
    /// The body of the `incoming` request on a buffered route.
    private var body: [UInt8] = []
    /// Input held back while reads are paused or after an upgrade request; `heldOffset` bytes of it are parsed.
    private var held: [UInt8] = []
    private var heldOffset = 0
    /// Bumped whenever `held` is dropped, so a parse of a taken-out copy does not put it back.
    private var heldGeneration = 0
    /// Bytes passed to `next` are being parsed (from `read` until they are used up).
    private var reading = false
    /// Held input is being parsed after reads resumed.
    private var resuming = false
    /// Inside a parsing step: an upgrade waits until the input after its request is held.
    private var parsing = false
    private var quiescing = false
    /// The client half-closed: answer what it sent completely, then close.
    private var peerClosed = false
    private var pendingCall: PendingCall?
    /// The next action (most events have just one), then those queued after it, from
    /// `actionIndex` (moved out as they are taken).
    private var firstAction: Action?
    private var actions: [Action?] = []
    private var actionIndex = 0
    /// The loop time and queued output of the current `next` call.
    private var now: UInt64 = 0
    private var outbound = 0

    init(configuration: Configuration) {
        self.configuration = configuration
        parser = HTTPRequestParser(limits: configuration.parserLimits)
        updateDeadline()
    }

    /// `parser.phase`, read from the parser's stored fields so the parser is not copied.
    private var parserPhase: HTTPRequestParser.Phase {
        HTTPRequestParser.phase(state: parser.state, inHead: parser.inHead)
    }

    private var parserUpgraded: Bool { parser.state == .upgraded }

    private var isClosing: Bool { lifecycle != .open }

    /// Bytes held back (for tests and the upgrade's leftover).
    var heldBytes: Int { held.count - heldOffset }

    // MARK: - Driving

    /// Bytes arrived: the following `next` calls parse them.
    mutating func read() {
        guard lifecycle == .open else { return }
        reading = true
    }

    /// The next action, or nil when there is nothing to do until the next event. `input` and
    /// `offset` are the bytes of the last `read` (empty otherwise); `now` is the loop's time of
    /// this turn and `outbound` the bytes queued on the socket.
    mutating func next(_ input: UnsafeRawBufferPointer, offset: inout Int, now: UInt64, outbound: Int) -> Action? {
        self.now = now
        self.outbound = outbound
        while true {
            if let action = popAction() { return action }
            guard lifecycle != .closed, pendingCall == nil else { return nil }
            if pullStreamIfPossible() { continue }
            if readsPaused, canResume() {
                readsPaused = false
                resuming = true
            }
            if resuming {
                parseHeld()
            } else if reading {
                if parse(input, &offset, fromHeld: false) {
                    reading = false
                    // An upgrade request may be first in line now that its leftover bytes are held.
                    if parserUpgraded { writeReadyResponses() }
                    updateDeadline()
                }
            } else {
                return nil
            }
        }
    }

    private mutating func emit(_ action: consuming Action) {
        if firstAction == nil && actions.isEmpty {
            firstAction = action
        } else {
            actions.append(action)
        }
    }

    private mutating func popAction() -> Action? {
        if let action = firstAction.take() { return action }
        guard actionIndex < actions.count else { return nil }
        let action = actions[actionIndex].take()
        actionIndex += 1
        if actionIndex == actions.count {
            actions.removeAll(keepingCapacity: true)
            actionIndex = 0
        }
        return action
    }

    private var hasActions: Bool { firstAction != nil || actionIndex < actions.count }

    // MARK: - Events

    /// The socket has room again (its queued output drained).
    mutating func outputDrained() {}

    /// A streamed body's consumer took what was buffered: reads may resume (checked by `next`).
    mutating func bodyStreamDrained() {}

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
                emit(.close)
            } else {
                writeReadyResponses()
            }
            updateDeadline()
        }
    }

    /// The socket closed.
    mutating func connectionClosed() {
        lifecycle = .closed
        firstAction = nil
        actions.removeAll()
        actionIndex = 0
        pendingCall = nil
        slots.removeAll()
        dropIncoming(.incomplete)
        dropHeld()
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
            emit(.close)
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
            if let stream = current.stream { emit(.failBody(stream, .abandoned)) }
            stopReading()
            continueState = .notExpected
            readsPaused = false
            resuming = false
            reading = false
            dropHeld()
            emit(.pauseReading)
        }
        let index = Int(sequence - slots[0].sequence)
        guard index < slots.count, slots[index].sequence == sequence, case .running = slots[index].state else { return }
        guard index == 0 else {
            slots[index].state = .ready(response)
            return
        }
        let first = removeFirstSlot()
        guard send(response, first) else {
            finishWriting()
            return
        }
        writeReadyResponses()
    }

    /// The inline handler of `callInline` returned `response`; `request` is given back for its memory.
    mutating func inlineAnswered(_ response: HTTPResponse, request: consuming HTTPRequest) {
        guard let call = pendingCall.take() else { return }
        parser.reuseHeadMemory(of: request)
        answer(response, call)
    }

    /// The attempt of `attemptInline` returned `taken`, having answered at once with `answer` or
    /// not; `request` is given back (for its memory, or for the fallback handler).
    mutating func attemptFinished(taken: Bool, answer immediate: HTTPResponse?, request: consuming HTTPRequest) {
        guard let call = pendingCall.take() else { return }
        if let immediate {
            answer(immediate, call)
        } else {
            slots.append(Slot(
                sequence: call.sequence, method: call.method, route: call.route, keepAlive: call.keepAlive, started: call.started,
                http10: call.http10, state: .running))
        }
        if taken {
            parser.reuseHeadMemory(of: request)
        } else if let fallback = call.fallback {
            emit(.callAsync(fallback, request, call.route, call.parameters, sequence: call.sequence))
        }
    }

    /// The stream asked for by `startStreamedHandler`.
    mutating func bodyStreamCreated(_ stream: HTTPRequestBodyStream) {
        incoming?.stream = stream
    }

    /// `deliverBody` was done; `holdsReads`: the stream's consumer is behind and reads pause.
    mutating func bodyDelivered(holdsReads: Bool) {
        guard holdsReads, lifecycle == .open else { return }
        readsPaused = true
        emit(.pauseReading)
    }

    /// The upgrade route decided.
    mutating func upgradeDecided(_ decision: HTTPUpgradeAction) {
        guard lifecycle != .closed, let first = slots.first, case .upgrading = first.state else { return }
        switch decision {
        case .accept(let response, let handler):
            slots.removeAll()
            lifecycle = .handedOver
            deadline = .none
            emit(.write(response, Write(
                keepAlive: true, headRequest: false, cachesFields: false, method: first.method, route: first.route, started: first.started)))
            let leftover = held.count > heldOffset ? Array(held[heldOffset...]) : []
            dropHeld()
            emit(.handOver(handler, leftover: leftover))
        case .reject(let response):
            slots[0].state = .ready(response)
            slots[0].keepAlive = false
            writeReadyResponses()
        }
    }

    /// A chunk (nil: the end) or an error of the stream first in the queue.
    mutating func responseChunk(_ result: Result<[UInt8]?, any Error>) {
        guard lifecycle != .closed, let first = slots.first, case .streaming(var stream) = first.state else { return }
        let action: HTTPResponseStreamStateMachine.Action
        switch result {
        case .success(let chunk): action = stream.machine.received(chunk)
        case .failure(let error): action = stream.machine.failed(error)
        }
        slots[0].state = .streaming(stream)
        perform(action)
    }

    // MARK: - Reading

    private func mustPauseBeforeNextRequest() -> Bool {
        slots.count >= configuration.maxPipelinedRequests || outbound > configuration.outboundHighWater
    }

    private func canResume() -> Bool {
        lifecycle == .open && !mustPauseBeforeNextRequest() && !(incoming?.stream?.isHoldingReads ?? false)
    }

    private mutating func hold(_ input: UnsafeRawBufferPointer, from offset: Int) {
        guard offset < input.count else { return }
        held.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
    }

    private mutating func dropHeld() {
        held = []
        heldOffset = 0
        heldGeneration &+= 1
    }

    /// Parses held input after reads resumed; when it is used up (or parsing stops again), reads resume.
    private mutating func parseHeld() {
        let buffer = held
        held = []
        let generation = heldGeneration
        var offset = heldOffset
        let finished = buffer.withUnsafeBytes { parse($0, &offset, fromHeld: true) }
        if generation == heldGeneration {
            if offset >= buffer.count {
                heldOffset = 0
                held = []
            } else {
                heldOffset = offset
                held = buffer
            }
        }
        guard finished else { return }
        resuming = false
        if parserUpgraded { writeReadyResponses() }
        if peerClosed, !readsPaused, lifecycle != .closed {
            finishAfterPeerClosed()
            return
        }
        if !readsPaused, lifecycle == .open, !parserUpgraded {
            emit(.resumeReading)
        }
        updateDeadline()
    }

    /// Parses `input[offset...]` until an action is queued (false: call again) or the input is
    /// used up or parsing stopped (true). Input not parsed while reads pause is held (unless it
    /// is the held input itself).
    private mutating func parse(_ input: UnsafeRawBufferPointer, _ offset: inout Int, fromHeld: Bool) -> Bool {
        guard lifecycle == .open else { return true }
        if readsPaused || parserUpgraded {
            if !fromHeld {
                // Bytes of a new read are held and reads stop (again); the rest of a read that
                // paused them is only held.
                if offset == 0 { emit(.pauseReading) }
                hold(input, from: offset)
                offset = input.count
            }
            return true
        }
        parsing = true
        defer { parsing = false }
        do {
            while lifecycle == .open {
                if parserPhase == .idle && mustPauseBeforeNextRequest() {
                    if !fromHeld {
                        hold(input, from: offset)
                        offset = input.count
                    }
                    readsPaused = true
                    emit(.pauseReading)
                    return true
                }
                let (step, consumed) = try parser.advance(in: UnsafeRawBufferPointer(rebasing: input[offset...]))
                offset += consumed
                switch step {
                case .needMore:
                    if parserUpgraded && !fromHeld {
                        hold(input, from: offset)
                        offset = input.count
                        emit(.pauseReading)
                    }
                    return true
                case .head:
                    let completed = parser.completedHead()
                    // The router, not the parser, picks the route: from the path bytes still in the parser.
                    let routes = configuration.routes
                    let match = parser.withCompletedPath { routes.match(completed.method, rawPath: $0) }
                    if completed.hasBody {
                        receivedHead(parser.takeHead(), match: match)
                    } else if case .found(let route, _) = match, let constant = route.constant {
                        // Complete already: the head itself is not needed, no request value is made.
                        parser.discardHead()
                        try expectEnd(UnsafeRawBufferPointer(rebasing: input[offset...]))
                        answer(constant, route: route, method: completed.method, keepAlive: completed.keepAlive,
                               isUpgrade: completed.isUpgrade, sequence: takeSequence())
                    } else {
                        let head = parser.takeHead()
                        try expectEnd(UnsafeRawBufferPointer(rebasing: input[offset...]))
                        received(head, body: [], match: match, sequence: takeSequence(), started: now)
                    }
                case .body(let chunk):
                    receivedBody(chunk)
                case .end:
                    receivedEnd()
                }
                if hasActions || pendingCall != nil { return false }
            }
        } catch {
            if error == .bodyTooLarge, let current = incoming {
                fail(with: current.tooLarge, streamError: .tooLarge(limit: current.limit))
            } else {
                fail(with: .plain(error.status, error.description), streamError: .malformed(error))
            }
        }
        return true
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
        let started = now
        var route: Route?
        if case .found(let found, _) = match { route = found }
        let limit = route?.bodyLimit ?? configuration.maxBodyBytes
        let tooLarge = route?.bodyTooLarge ?? configuration.bodyTooLarge
        if case .contentLength(let length) = head.bodyFraming, length > limit {
            // 413 before any body byte; the body is never read.
            stopReading()
            emit(.pauseReading)
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
                emit(.startStreamedHandler(handler, head, route, parameters, sequence: sequence))
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

    /// Body bytes of the `incoming` request.
    private mutating func receivedBody(_ chunk: UnsafeRawBufferPointer) {
        guard let current = incoming else { return }
        let received = current.received + chunk.count
        guard received <= current.limit else {
            fail(with: current.tooLarge, streamError: .tooLarge(limit: current.limit))
            return
        }
        incoming?.received = received
        if let stream = current.stream {
            if !chunk.isEmpty { emit(.deliverBody(stream, Array(chunk))) }
        } else {
            body.append(contentsOf: chunk)
        }
    }

    /// Forgets the request being read; a streamed body's handler learns why through its stream.
    private mutating func dropIncoming(_ reason: HTTPRequestBodyError) {
        if let stream = incoming.take()?.stream { emit(.failBody(stream, reason)) }
    }

    /// The body of the `incoming` request is complete.
    private mutating func receivedEnd() {
        guard let request = incoming.take() else { return }
        continueState = .notExpected
        if let stream = request.stream {
            // Its handler is running already; the slot is in line.
            emit(.finishBody(stream))
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
            emit(.close)
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
                pendingCall = PendingCall(
                    sequence: sequence, method: method, route: route, parameters: parameters, keepAlive: keepAlive, started: started,
                    http10: http10, fallback: handler)
                emit(.attemptInline(attempt, HTTPRequest(head: head, body: requestBody, parameters: parameters), sequence: sequence))
            case .inline(let handler):
                pendingCall = PendingCall(
                    sequence: sequence, method: method, route: route, parameters: parameters, keepAlive: keepAlive, started: started,
                    http10: http10, fallback: nil)
                emit(.callInline(handler, HTTPRequest(head: head, body: requestBody, parameters: parameters), route, parameters))
            case .async(let handler):
                enqueue(Slot(
                    sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10,
                    state: .running))
                let bodyStream: HTTPRequestBodyStream? = route.streamsBody ? .empty() : nil
                emit(.callAsync(
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
        guard slots.isEmpty else {
            slots.append(Slot(sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: now, state: .constant(constant)))
            return
        }
        // What `enqueue` and `send` do with a slot, without making one.
        _ = send(constant, method: method, route: route, keepAlive: keepAlive, started: now)
        finishWriting()
    }

    /// The answer of an inline handler or attempt.
    private mutating func answer(_ response: HTTPResponse, _ call: PendingCall) {
        answer(
            response, sequence: call.sequence, method: call.method, route: call.route, keepAlive: call.keepAlive, started: call.started,
            http10: call.http10)
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
        resuming = false
        reading = false
        dropHeld()
        emit(.pauseReading)
        if let stream = incoming?.stream {
            incoming = nil
            emit(.failBody(stream, streamError))
        } else if let request = incoming.take() {
            body = []
            slots.append(Slot(
                sequence: request.sequence, method: request.head.method, route: nil, keepAlive: false, started: request.started,
                state: .ready(response)))
        } else {
            slots.append(Slot(sequence: nextSequence, method: nil, route: nil, keepAlive: false, started: now, state: .ready(response)))
            nextSequence &+= 1
        }
        emit(.closingAfter(response.status))
        writeReadyResponses()
        updateDeadline()
    }

    // MARK: - Writing

    /// Writes the responses at the front of the queue that are ready, in request order.
    private mutating func writeReadyResponses() {
        while lifecycle != .closed, !slots.isEmpty {
            switch slots[0].state {
            case .upgrade(let handler, let request, let route, let parameters):
                if parsing { return }
                if quiescing {
                    slots[0].state = .upgrading
                    upgradeDecided(.reject(.plain(.serviceUnavailable, "Shutting down")))
                } else {
                    slots[0].state = .upgrading
                    emit(.upgrade(handler, request, route, parameters))
                }
                return
            case .upgrading, .streaming, .running:
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
        let last = slots.isEmpty && incoming == nil
        let asksToClose = response.headers.containsToken("close", inField: "connection")
        var write = Write(
            keepAlive: slot.keepAlive && !(isClosing && last) && !asksToClose, headRequest: slot.method == .head, method: slot.method,
            route: slot.route, started: slot.started)
        if case .stream(let length, let next) = response.body, response.status.allowsContent {
            write.closeDelimited = length == nil && slot.http10
            if write.closeDelimited { write.keepAlive = false }
            emit(.write(response, write))
            guard slot.method != .head, length != 0 else { return sent(keepAlive: write.keepAlive) }
            var streaming = slot
            streaming.keepAlive = write.keepAlive
            streaming.state = .streaming(OutgoingStream(
                next: next, machine: HTTPResponseStreamStateMachine(length: length, closeDelimited: write.closeDelimited)))
            slots.insert(streaming, at: 0)
            return false
        }
        emit(.write(response, write))
        return sent(keepAlive: write.keepAlive)
    }

    /// `send` for a `constant` route's answer.
    private mutating func send(_ constant: ConstantResponse, method: HTTPMethod?, route: Route?, keepAlive requested: Bool, started: UInt64) -> Bool {
        let last = slots.isEmpty && incoming == nil
        let keepAlive = requested && !(isClosing && last) && !constant.asksToClose
        emit(.writeConstant(constant, Write(keepAlive: keepAlive, headRequest: method == .head, method: method, route: route, started: started)))
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

    /// After responses were written: closes a finished connection (paused reads resume in `next`).
    private mutating func finishWriting() {
        guard lifecycle != .closed else { return }
        if slots.isEmpty && isClosing {
            if lifecycle == .closing { emit(.close) }
            return
        }
        updateDeadline()
    }

    /// Sends `100 Continue` once the request being read is the first without a response.
    private mutating func sendContinueIfNeeded() {
        guard continueState == .due, lifecycle == .open, let current = incoming, slots.isEmpty || slots[0].sequence == current.sequence
        else { return }
        continueState = .sent
        emit(.writeBytes(HTTPResponseSerializer.continueResponse))
    }

    // MARK: - Streamed responses

    /// Asks the stream first in the queue for its next chunk when its machine says so (room in
    /// the output queue, no pull in flight); true when that queued an action.
    private mutating func pullStreamIfPossible() -> Bool {
        guard !slots.isEmpty, case .streaming = slots[0].state, case .streaming(var stream) = slots[0].state else { return false }
        let action = stream.machine.outputQueued(outbound, lowWater: configuration.streamLowWater)
        guard action != .wait else { return false }
        slots[0].state = .streaming(stream)
        perform(action)
        return hasActions
    }

    /// Executes what the stream's machine decided.
    private mutating func perform(_ action: HTTPResponseStreamStateMachine.Action) {
        switch action {
        case .wait:
            return
        case .pull:
            guard case .streaming(let stream) = slots[0].state else { return }
            emit(.pullResponseChunk(stream.next))
        case .write(let bytes):
            emit(.writeBytes(bytes))
        case .finish(let bytes):
            emit(.writeBytes(bytes))
            let slot = removeFirstSlot()
            if sent(keepAlive: slot.keepAlive) {
                writeReadyResponses()
            } else {
                finishWriting()
            }
        case .abort(let reason):
            // The head went out: the client can only learn it from the connection closing.
            emit(.responseStreamFailed(reason))
            stopReading()
            slots.removeAll()
            incoming = nil
            emit(.close)
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
            case .body: wanted = incoming != nil && !isClosing ? .body : .none
            case .idle: wanted = slots.isEmpty && !isClosing ? .idle : .none
            default: wanted = .none
            }
        }
        guard wanted != deadline else { return }
        deadline = wanted
        switch wanted {
        case .none: return
        case .idle: emit(.startDeadline(configuration.idleTimeout))
        case .head: emit(.startDeadline(configuration.headerTimeout))
        case .body: emit(.startDeadline(configuration.bodyTimeout))
        }
    }
}
