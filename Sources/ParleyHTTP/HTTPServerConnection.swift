import ParleyLog
import ParleyNet

/// One connection's HTTP state: parser, the request being read, the queue of read requests
/// awaiting their responses (in request order), deadlines, and the switch to another protocol.
///
/// A request whose response is ready when it has been read and nothing is queued before it (an
/// inline route, a 404) is answered at once, without entering the queue.
///
/// Owned by the connection's loop thread; `@unchecked Sendable` only so async handlers' tasks
/// (pinned to that loop) can hand their response back. `complete` re-enters through the loop.
final class HTTPServerConnection: ConnectionHandler, @unchecked Sendable {
    /// A request read completely (or refused) whose response is not written yet.
    private struct Slot {
        let sequence: UInt64
        /// nil when the request line could not be parsed.
        let method: HTTPMethod?
        /// The matched route, for the observer.
        let route: Route?
        var response: HTTPResponse?
        var keepAlive: Bool
        let started: UInt64
        var upgradePending = false
        /// The answer of a `constant` route (instead of `response`).
        var constant: ConstantResponse?
        /// The request was HTTP/1.0: a stream of unknown length is sent until the connection closes.
        var http10 = false
        /// The body being sent: this slot's head is written and it stays first until the stream ends.
        var stream: OutgoingStream?
        /// The file region being sent with `sendfile` (instead of `stream`).
        var file: OutgoingFile?

        init(
            sequence: UInt64, method: HTTPMethod?, route: Route?, response: HTTPResponse?, keepAlive: Bool, started: UInt64,
            constant: ConstantResponse? = nil, http10: Bool = false
        ) {
            self.sequence = sequence
            self.method = method
            self.route = route
            self.response = response
            self.keepAlive = keepAlive
            self.started = started
            self.constant = constant
            self.http10 = http10
        }

        var isReady: Bool { response != nil || constant != nil }
    }

    /// A streamed response body being written: its producer and the state machine that says
    /// when to pull it and what to write.
    private struct OutgoingStream {
        let next: @Sendable () async throws -> [UInt8]?
        var machine: HTTPResponseStreamStateMachine
    }

    /// A file region being sent: the next offset to send from.
    private struct OutgoingFile {
        let region: FileRegion
        var offset: Int
    }

    /// Bytes offered to one `sendfile` call.
    static let sendFileChunk = 1 << 20

    /// Queued output below which the next chunk of a streamed body is pulled.
    static let streamLowWater = 256 << 10

    /// The request whose head has arrived and whose body is being read.
    private struct Incoming {
        let sequence: UInt64
        var head: HTTPRequestHead
        let match: RouteMatch
        let started: UInt64
        /// The route's body limit and the answer past it.
        let limit: Int
        let tooLarge: HTTPResponse
        /// Body bytes read so far.
        var received = 0
        /// Set on a streaming route: the handler is running and reads the body from here.
        var stream: HTTPRequestBodyStream?
    }

    /// `100 Continue` for the request being read.
    private enum ContinueState {
        case notExpected, due, sent
    }

    private enum Deadline {
        case none, idle, head, body
    }

    private let connection: Connection
    private let core: HTTPServerCore
    private let context: HTTPLoopContext
    private var parser: HTTPRequestParser
    private var slots: [Slot] = []
    private var nextSequence: UInt64 = 0
    private var incoming: Incoming?
    private var continueState = ContinueState.notExpected
    /// The body of the `incoming` request.
    private var body: [UInt8] = []
    /// Input held back while parsing is paused (pipelining bound, backpressure, pending upgrade).
    private var pendingInput: [UInt8] = []
    private var parsingPaused = false
    private var parsing = false
    /// No more requests are read; the connection closes once the queue is written.
    private var closing = false
    private var quiescing = false
    /// The client half-closed: answer what it sent completely, then close.
    private var peerClosed = false
    private var closed = false
    private var handedOver = false
    private var pendingUpgrade: (handler: HTTPUpgradeHandler, request: HTTPRequest, context: RequestContext)?
    /// While an inline attempt runs: its request's sequence, and the answer if it gives one at
    /// once (queued then as a ready slot, written without touching the queue when it is empty).
    private var attemptSequence: UInt64?
    private var attemptAnswer: HTTPResponse?
    private var deadlineKind = Deadline.none
    private var deadline: UInt64 = 0

    init(connection: Connection, core: HTTPServerCore, context: HTTPLoopContext) {
        self.connection = connection
        self.core = core
        self.context = context
        self.parser = HTTPRequestParser(limits: core.parserLimits)
        context.register(self)
        updateDeadline()
    }

    /// `parser.phase`, read from the parser's stored fields so the parser is not copied.
    private var parserPhase: HTTPRequestParser.Phase {
        HTTPRequestParser.phase(state: parser.state, inHead: parser.inHead)
    }

    /// `parser.isUpgraded`, read the same way.
    private var parserUpgraded: Bool { parser.state == .upgraded }

    // MARK: - ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed, !closing else { return }
        if parsingPaused || parserUpgraded {
            pendingInput.append(contentsOf: bytes)
            connection.pauseReading()
            return
        }
        parse(bytes)
        updateDeadline()
    }

    func connectionDidDrain(_ connection: Connection) {
        if parsingPaused { resumeParsingIfPossible() }
        pullStreamIfPossible()
    }

    func connectionDidReceiveEOF(_ connection: Connection) {
        guard !closed else { return }
        peerClosed = true
        // Requests still held back (pipelining bound) are answered first.
        if !parsingPaused { finishAfterPeerClosed() }
    }

    /// A half-closed client may still read: answer every complete request, drop a partial one.
    private func finishAfterPeerClosed() {
        dropIncoming(.incomplete)
        body = []
        closing = true
        if slots.isEmpty {
            connection.close()
        } else {
            writeReadyResponses()
        }
        updateDeadline()
    }

    func connectionDidClose(_ connection: Connection) {
        closed = true
        slots.removeAll()
        dropIncoming(.incomplete)
        pendingInput = []
        pendingUpgrade = nil
        context.unregister(self)
    }

    func connectionShouldQuiesce(_ connection: Connection) {
        guard !closed else { return }
        quiescing = true
        switch parserPhase {
        case .head, .body:
            // A request is arriving: let it finish (its deadline still applies); it will be the last.
            return
        default:
            closing = true
            if slots.isEmpty {
                connection.close()
            } else {
                writeReadyResponses()
            }
            updateDeadline()
        }
    }

    // MARK: - Reading

    private func parse(_ input: UnsafeRawBufferPointer) {
        parseEvents(input)
        // An upgrade request may be at the front of the queue now that its leftover bytes are kept.
        if parserUpgraded { writeReadyResponses() }
    }

    private func parseEvents(_ input: UnsafeRawBufferPointer) {
        parsing = true
        defer { parsing = false }
        var offset = 0
        do {
            while !closed && !closing {
                if parserPhase == .idle && mustPauseBeforeNextRequest() {
                    pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                    parsingPaused = true
                    connection.pauseReading()
                    return
                }
                let (step, consumed) = try parser.advance(in: UnsafeRawBufferPointer(rebasing: input[offset...]))
                offset += consumed
                switch step {
                case .needMore:
                    if parserUpgraded {
                        pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                        connection.pauseReading()
                    }
                    return
                case .head:
                    let completed = parser.completedHead()
                    // The router, not the parser, picks the route: from the path bytes still in the parser.
                    let routes = core.routes
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
                               isUpgrade: completed.isUpgrade, sequence: takeSequence(), started: startTime())
                        continue
                    }
                    let head = parser.takeHead()
                    try expectEnd(UnsafeRawBufferPointer(rebasing: input[offset...]))
                    received(head, body: [], match: match, sequence: takeSequence(), started: startTime())
                case .body(let chunk):
                    if receivedBody(chunk) {
                        // A streamed body's consumer is behind: read on once it has caught up.
                        pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                        parsingPaused = true
                        connection.pauseReading()
                        return
                    }
                case .end: receivedEnd()
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
        slots.count >= core.configuration.maxPipelinedRequests
            || connection.pendingOutboundBytes > core.configuration.outboundHighWater
    }

    private func resumeParsingIfPossible() {
        guard parsingPaused, !parsing, !closed, !closing, !mustPauseBeforeNextRequest(),
              !(incoming?.stream?.isHoldingReads ?? false) else { return }
        parsingPaused = false
        let input = pendingInput
        pendingInput = []
        // Also with no input left mid-body: a pause on a body's last chunk still owes its `.end`.
        if !input.isEmpty || parserPhase == .body {
            input.withUnsafeBytes { parse($0) }
        }
        if peerClosed, !parsingPaused, !closed {
            finishAfterPeerClosed()
            return
        }
        if !parsingPaused, !closed, !closing, !parserUpgraded {
            connection.resumeReading()
        }
        updateDeadline()
    }

    /// Takes the `.end` that follows a bodiless head (it uses no input).
    private func expectEnd(_ input: UnsafeRawBufferPointer) throws(HTTPParserError) {
        guard case (.end, 0) = try parser.advance(in: input) else {
            preconditionFailure("HTTPServerConnection: a bodiless head not followed by its end")
        }
    }

    private func takeSequence() -> UInt64 {
        defer { nextSequence &+= 1 }
        return nextSequence
    }

    /// When the request started, for the observer: the time the loop woke up for it (no clock read).
    private func startTime() -> UInt64 {
        connection.loop.iterationNanoseconds
    }

    /// A head with a body: the body is read next (on a streaming route, while its handler runs).
    private func receivedHead(_ head: HTTPRequestHead, match: RouteMatch) {
        let sequence = takeSequence()
        let started = startTime()
        var route: Route?
        if case .found(let found, _) = match { route = found }
        let limit = route?.bodyLimit ?? core.configuration.limits.maxBodyBytes
        let tooLarge = route?.bodyTooLarge ?? core.bodyTooLarge
        if case .contentLength(let length) = head.bodyFraming, length > limit {
            // 413 before any body byte; the body is never read.
            closing = true
            connection.pauseReading()
            enqueue(Slot(sequence: sequence, method: head.method, route: route, response: tooLarge, keepAlive: false, started: started))
            return
        }
        if head.expectContinue && head.hasBody {
            guard case .found = match else {
                // 404/405 before the body: answer now, never read the body, close.
                closing = true
                enqueue(Slot(
                    sequence: sequence, method: head.method, route: nil, response: responseForUnrouted(match),
                    keepAlive: false, started: started))
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
                startStreamedRequest(head, route: route, parameters: parameters, handler: handler, sequence: sequence, started: started)
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

    /// The handler of a streaming route starts as soon as the head is read; its slot keeps its place in line.
    private func startStreamedRequest(
        _ head: HTTPRequestHead, route: Route, parameters: PathParameters, handler: @escaping HTTPHandler, sequence: UInt64, started: UInt64
    ) {
        let loop = connection.loop
        let stream = HTTPRequestBodyStream { [weak self] in
            guard let connection = self else { return }
            loop.execute { connection.bodyStreamDrained() }
        }
        incoming?.stream = stream
        slots.append(Slot(
            sequence: sequence, method: head.method, route: route, response: nil, keepAlive: head.keepAlive, started: started,
            http10: head.version == .http1_0))
        runAsync(handler, HTTPRequest(head: head, parameters: parameters, bodyStream: stream), makeContext(route, parameters), sequence: sequence)
    }

    /// Body bytes of the `incoming` request; returns true when reading must pause (a streamed
    /// body's consumer is behind).
    private func receivedBody(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard let current = incoming else { return false }
        let received = current.received + chunk.count
        guard received <= current.limit else {
            fail(with: current.tooLarge, streamError: .tooLarge(limit: current.limit))
            return false
        }
        incoming?.received = received
        if let stream = current.stream { return stream.append(chunk) }
        body.append(contentsOf: chunk)
        return false
    }

    /// A streamed body's consumer took what was buffered: read on.
    private func bodyStreamDrained() {
        guard !closed else { return }
        resumeParsingIfPossible()
    }

    /// Forgets the request being read; a streamed body's handler learns why through its stream.
    private func dropIncoming(_ reason: HTTPRequestBodyError) {
        incoming.take()?.stream?.fail(reason)
    }

    /// The body of the `incoming` request is complete.
    private func receivedEnd() {
        guard let request = incoming.take() else { return }
        continueState = .notExpected
        if let stream = request.stream {
            // Its handler is running already; the slot is in line.
            stream.finish()
            if !request.head.keepAlive || quiescing { closing = true }
            return
        }
        let requestBody = body
        body = []
        received(request.head, body: requestBody, match: request.match, sequence: request.sequence, started: request.started)
    }

    /// A request was read completely: answer it (inline, 404/405), start its task, or hold its upgrade.
    private func received(_ head: consuming HTTPRequestHead, body requestBody: [UInt8], match: RouteMatch, sequence: UInt64, started: UInt64) {
        if !head.keepAlive || quiescing { closing = true }
        if head.isUpgrade {
            // The parser has stopped: unless a route takes the connection over, close after answering.
            if case .found(let route, _) = match, case .upgrade = route.handler {} else { closing = true }
        }
        let method = head.method
        let keepAlive = head.keepAlive
        let http10 = head.version == .http1_0
        switch match {
        case .notFound, .methodNotAllowed:
            answer(responseForUnrouted(match), sequence: sequence, method: method, route: nil, keepAlive: keepAlive, started: started)
        case .found(let route, _) where route.constant != nil:
            enqueue(Slot(
                sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started,
                constant: route.constant))
        case .found(let route, let parameters):
            if case .inlineFirst(let attempt, let handler) = route.handler {
                let request = HTTPRequest(head: head, body: requestBody, parameters: parameters)
                attemptSequence = sequence
                let taken = attempt(request, HTTPResponder(connection: self, sequence: sequence))
                attemptSequence = nil
                if let response = attemptAnswer.take() {
                    answer(response, sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10)
                } else {
                    slots.append(Slot(
                        sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started,
                        http10: http10))
                }
                if taken {
                    parser.reuseHeadMemory(of: request)
                } else {
                    runAsync(handler, request, makeContext(route, parameters), sequence: sequence)
                }
                return
            }
            let requestContext = makeContext(route, parameters)
            switch route.handler {
            case .inline(let handler):
                let request = HTTPRequest(head: head, body: requestBody, parameters: parameters)
                let response = handler(request, requestContext)
                parser.reuseHeadMemory(of: request)
                answer(response, sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10)
            case .async(let handler), .inlineFirst(_, let handler):
                enqueue(Slot(
                    sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started,
                    http10: http10))
                let bodyStream: HTTPRequestBodyStream? = route.streamsBody ? .empty() : nil
                runAsync(
                    handler, HTTPRequest(head: head, body: requestBody, parameters: parameters, bodyStream: bodyStream), requestContext,
                    sequence: sequence)
            case .upgrade(let handler):
                var slot = Slot(sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started)
                if head.isUpgrade {
                    pendingUpgrade = (handler, HTTPRequest(head: head, body: requestBody, parameters: parameters), requestContext)
                    slot.upgradePending = true
                } else {
                    var response = HTTPResponse.plain(.init(426), "Upgrade Required")
                    response.headers.add("Connection", "Upgrade")
                    slot.response = response
                }
                enqueue(slot)
            }
        }
    }

    private func makeContext(_ route: Route, _ parameters: PathParameters) -> RequestContext {
        RequestContext(
            parameters: parameters, route: route.pattern, requestID: context.nextRequestID(),
            remoteAddress: connection.remoteAddress, loop: connection.loop, logger: core.logger)
    }

    /// A bodiless request for a `constant` route, answered without building its head: the same
    /// steps as `received` for an inline route.
    private func answer(
        _ constant: ConstantResponse, route: Route, method: HTTPMethod, keepAlive: Bool, isUpgrade: Bool, sequence: UInt64, started: UInt64
    ) {
        // An inline route never takes an upgrade over: close after answering, like `received`.
        if !keepAlive || quiescing || isUpgrade { closing = true }
        guard slots.isEmpty else {
            slots.append(Slot(
                sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started, constant: constant))
            return
        }
        // What `enqueue` and `send` do with a slot, without making one.
        _ = send(constant, method: method, route: route, keepAlive: keepAlive, started: started)
        finishWriting()
    }

    /// A request answered at once: written now when nothing precedes it, else queued ready.
    private func answer(
        _ response: HTTPResponse, sequence: UInt64, method: HTTPMethod, route: Route?, keepAlive: Bool, started: UInt64, http10: Bool = false
    ) {
        guard slots.isEmpty else {
            slots.append(Slot(
                sequence: sequence, method: method, route: route, response: response, keepAlive: keepAlive, started: started,
                http10: http10))
            return
        }
        // What `enqueue` and `send` do with a ready slot, without making one.
        _ = send(response, sequence: sequence, method: method, route: route, keepAlive: keepAlive, started: started, http10: http10)
        finishWriting()
    }

    /// Queues a read request; one whose response is ready and that nothing precedes is written now.
    private func enqueue(_ slot: consuming Slot) {
        guard slots.isEmpty, slot.isReady, !slot.upgradePending else {
            slots.append(slot)
            return
        }
        _ = send(slot)
        finishWriting()
    }

    private func runAsync(_ handler: @escaping HTTPHandler, _ request: HTTPRequest, _ requestContext: RequestContext, sequence: UInt64) {
        let loop = connection.loop
        let core = self.core
        Task(executorPreference: loop) {
            let response: HTTPResponse
            do {
                response = try await handler(request, requestContext)
            } catch {
                response = core.response(for: error, context: requestContext)
            }
            self.respond(sequence, response)
        }
    }

    /// Completes request `sequence` from any thread: at once on the connection's loop, else there.
    func respond(_ sequence: UInt64, _ response: HTTPResponse) {
        let loop = connection.loop
        guard loop.inEventLoop else {
            loop.execute { self.respond(sequence, response) }
            return
        }
        if sequence == attemptSequence {
            attemptAnswer = response
        } else {
            complete(sequence, response)
        }
    }

    private func responseForUnrouted(_ match: RouteMatch) -> HTTPResponse {
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
    private func fail(with response: HTTPResponse, streamError: HTTPRequestBodyError) {
        guard !closed else { return }
        closing = true
        parsingPaused = false
        pendingInput = []
        connection.pauseReading()
        if let stream = incoming?.stream {
            incoming = nil
            stream.fail(streamError)
        } else if let request = incoming.take() {
            body = []
            slots.append(Slot(
                sequence: request.sequence, method: request.head.method, route: nil, response: response, keepAlive: false,
                started: request.started))
        } else {
            slots.append(Slot(
                sequence: nextSequence, method: nil, route: nil, response: response, keepAlive: false,
                started: startTime()))
            nextSequence &+= 1
        }
        core.logger.debug("closing after \(response.status)", [("connection", String(connection.id)), ("peer", connection.remoteAddress)])
        writeReadyResponses()
        updateDeadline()
    }

    // MARK: - Writing

    private func complete(_ sequence: UInt64, _ response: HTTPResponse) {
        guard !closed, !slots.isEmpty, sequence >= slots[0].sequence else { return }
        if let current = incoming, current.sequence == sequence {
            // A streaming handler answered before its body ended: the rest is not read.
            incoming = nil
            current.stream?.fail(.abandoned)
            closing = true
            continueState = .notExpected
            parsingPaused = false
            pendingInput = []
            connection.pauseReading()
        }
        let index = Int(sequence - slots[0].sequence)
        guard index < slots.count, slots[index].sequence == sequence, case .none = slots[index].response, slots[index].stream == nil,
              slots[index].file == nil else {
            return
        }
        guard index == 0, !slots[0].upgradePending else {
            slots[index].response = response
            if index == 0 { writeReadyResponses() }
            return
        }
        // The front of the queue: written without storing the response in its slot (what
        // `writeReadyResponses` does first), then whatever became ready behind it.
        let first = removeFirstSlot()
        guard send(response, sequence: first.sequence, method: first.method, route: first.route, keepAlive: first.keepAlive, started: first.started, http10: first.http10) else {
            finishWriting()
            return
        }
        writeReadyResponses()
    }

    /// Writes the responses at the front of the queue that are ready, in request order.
    private func writeReadyResponses() {
        while !closed, !slots.isEmpty {
            if slots[0].upgradePending {
                if parsing { return }
                performUpgrade()
                return
            }
            guard slots[0].isReady else { break }
            let slot = removeFirstSlot()
            guard send(slot) else { break }
        }
        finishWriting()
    }

    /// Takes the front of the queue; the only slot (the usual case) is taken from the end, which
    /// moves no other slot.
    private func removeFirstSlot() -> Slot {
        slots.count == 1 ? slots.removeLast() : slots.removeFirst()
    }

    /// Writes the response of `slot`, which was at the front of the queue (and is out of it now);
    /// returns false when the connection closes after it.
    private func send(_ slot: borrowing Slot) -> Bool {
        if let constant = slot.constant {
            return send(constant, method: slot.method, route: slot.route, keepAlive: slot.keepAlive, started: slot.started)
        }
        guard let response = slot.response else { preconditionFailure("HTTPServerConnection: sending a slot without response") }
        return send(
            response, sequence: slot.sequence, method: slot.method, route: slot.route, keepAlive: slot.keepAlive, started: slot.started,
            http10: slot.http10)
    }

    /// `send` for a request answered by `response`; a streamed body starts here and the
    /// connection writes nothing else until it ends (false is returned then, with the stream's
    /// slot first in the queue).
    private func send(
        _ response: HTTPResponse, sequence: UInt64, method: HTTPMethod?, route: Route?, keepAlive requested: Bool, started: UInt64,
        http10: Bool
    ) -> Bool {
        let last = slots.isEmpty && incoming == nil
        let fields = context.serializedFields(of: response.headers, switching: response.status.code == 101)
        let asksToClose = fields?.asksToClose ?? response.headers.containsToken("close", inField: "connection")
        var keepAlive = requested && !(closing && last) && !asksToClose
        var response = response
        if case .file(let region, let fallback) = response.body, response.status.allowsContent {
            guard connection.tlsSession == nil else {
                response.body = .stream(length: region.range.count, next: fallback)
                return send(response, sequence: sequence, method: method, route: route, keepAlive: requested, started: started, http10: http10)
            }
            write(response, keepAlive: keepAlive, headRequest: method == .head, fields: fields)
            if let observer = context.observer { report(method: method, route: route, started: started, status: response.status, to: observer) }
            guard method != .head, !region.range.isEmpty else { return sent(keepAlive: keepAlive) }
            var slot = Slot(sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started)
            slot.file = OutgoingFile(region: region, offset: region.range.lowerBound)
            slots.insert(slot, at: 0)
            sendFileIfPossible()
            return false
        }
        if case .stream(let length, let next) = response.body, response.status.allowsContent {
            let closeDelimited = length == nil && http10
            if closeDelimited { keepAlive = false }
            write(response, keepAlive: keepAlive, headRequest: method == .head, fields: fields, closeDelimited: closeDelimited)
            if let observer = context.observer { report(method: method, route: route, started: started, status: response.status, to: observer) }
            guard method != .head, length != 0 else { return sent(keepAlive: keepAlive) }
            var slot = Slot(sequence: sequence, method: method, route: route, response: nil, keepAlive: keepAlive, started: started)
            slot.stream = OutgoingStream(next: next, machine: HTTPResponseStreamStateMachine(length: length, closeDelimited: closeDelimited))
            slots.insert(slot, at: 0)
            pullStreamIfPossible()
            return false
        }
        write(response, keepAlive: keepAlive, headRequest: method == .head, fields: fields)
        if let observer = context.observer { report(method: method, route: route, started: started, status: response.status, to: observer) }
        return sent(keepAlive: keepAlive)
    }

    // MARK: - Streamed responses

    /// Asks the stream first in the queue for its next chunk when its machine says so (room in
    /// the output queue, no pull in flight); `connectionDidDrain` asks again.
    private func pullStreamIfPossible() {
        if !slots.isEmpty, slots[0].file != nil { return sendFileIfPossible() }
        guard !closed, !slots.isEmpty, slots[0].stream != nil else { return }
        let action = slots[0].stream!.machine.outputQueued(connection.pendingOutboundBytes, lowWater: HTTPServerConnection.streamLowWater)
        perform(action)
    }

    /// A chunk (or the end, or an error) of the stream first in the queue.
    private func streamed(_ result: Result<[UInt8]?, any Error>) {
        guard connection.loop.inEventLoop else {
            connection.loop.execute { self.streamed(result) }
            return
        }
        guard !closed, !slots.isEmpty, slots[0].stream != nil else { return }
        switch result {
        case .success(let chunk): perform(slots[0].stream!.machine.received(chunk))
        case .failure(let error): perform(slots[0].stream!.machine.failed(error))
        }
    }

    /// Executes what the stream's machine decided.
    private func perform(_ action: HTTPResponseStreamStateMachine.Action) {
        switch action {
        case .wait:
            return
        case .pull:
            let next = slots[0].stream!.next
            Task(executorPreference: connection.loop) {
                let result: Result<[UInt8]?, any Error>
                do {
                    result = .success(try await next())
                } catch {
                    result = .failure(error)
                }
                self.streamed(result)
            }
        case .write(let bytes):
            connection.write(bytes)
            pullStreamIfPossible()
        case .finish(let bytes):
            connection.write(bytes)
            let slot = removeFirstSlot()
            if sent(keepAlive: slot.keepAlive) {
                writeReadyResponses()
            } else {
                finishWriting()
            }
        case .abort(let reason):
            abortStream(reason)
        }
    }

    /// Sends the file region first in the queue while the socket takes it; `connectionDidDrain`
    /// calls again once it has room.
    private func sendFileIfPossible() {
        while !closed, !slots.isEmpty, let file = slots[0].file {
            let remaining = file.region.range.upperBound - file.offset
            if remaining == 0 {
                let slot = removeFirstSlot()
                if sent(keepAlive: slot.keepAlive) {
                    writeReadyResponses()
                } else {
                    finishWriting()
                }
                return
            }
            switch connection.writeFile(file.region.fd, offset: file.offset, count: min(remaining, Self.sendFileChunk)) {
            case .wrote(let count):
                slots[0].file!.offset += count
                if count < min(remaining, Self.sendFileChunk) { return }
            case .endOfFile:
                return abortStream("the file ended \(remaining) bytes short of its Content-Length")
            case .failed:
                return
            }
        }
    }

    /// A stream failed after its head went out: the client can only learn it from the connection closing.
    private func abortStream(_ reason: String) {
        core.logger.error("response stream failed", [("connection", String(connection.id)), ("error", reason)])
        closing = true
        slots.removeAll()
        incoming = nil
        connection.close()
    }

    /// `send` for a `constant` route's answer.
    private func send(_ constant: ConstantResponse, method: HTTPMethod?, route: Route?, keepAlive requested: Bool, started: UInt64) -> Bool {
        let last = slots.isEmpty && incoming == nil
        let keepAlive = requested && !(closing && last) && !constant.asksToClose
        write(constant, keepAlive: keepAlive, headRequest: method == .head)
        if let observer = context.observer { report(method: method, route: route, started: started, status: constant.response.status, to: observer) }
        return sent(keepAlive: keepAlive)
    }

    /// After a response went out: closes after a last one, else sends a `100 Continue` now due.
    private func sent(keepAlive: Bool) -> Bool {
        if !keepAlive {
            closing = true
            slots.removeAll()
            dropIncoming(.abandoned)
            return false
        }
        sendContinueIfNeeded()
        return true
    }

    /// After responses were written: closes a finished connection, resumes paused parsing.
    private func finishWriting() {
        guard !closed else { return }
        if slots.isEmpty && closing {
            connection.close()
            return
        }
        if parsingPaused { resumeParsingIfPossible() }
        updateDeadline()
    }

    /// Writes `response`; `fields` are its header fields from the loop's cache, if there.
    /// A streamed body is not written here (only its head).
    private func write(_ response: HTTPResponse, keepAlive: Bool, headRequest: Bool, fields: SerializedFields?, closeDelimited: Bool = false) {
        let body = response.bodyBytes
        let sendsBody = HTTPResponseSerializer.sendsBody(response, headRequest: headRequest) && !body.isEmpty
        let inlineBody = sendsBody && body.count <= 16 << 10
        var scratch = ScratchOutput(start: context.scratch, capacity: HTTPLoopContext.scratchCapacity)
        HTTPResponseSerializer.writeHead(
            response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: context.dateCache.headerLine, fields: fields,
            closeDelimited: closeDelimited, into: &scratch)
        if inlineBody { body.withUnsafeBytes { scratch.append($0) } }
        if !scratch.overflowed {
            connection.write(scratch.written)
            if sendsBody && !inlineBody { connection.write(body) }
            return
        }
        // A head too large for the scratch memory.
        var head = ArrayOutput(bytes: [])
        HTTPResponseSerializer.writeHead(
            response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: context.dateCache.headerLine, fields: fields,
            closeDelimited: closeDelimited, into: &head)
        connection.write(head.bytes)
        if sendsBody { connection.write(body) }
    }

    private func write(_ constant: ConstantResponse, keepAlive: Bool, headRequest: Bool) {
        var scratch = ScratchOutput(start: context.scratch, capacity: HTTPLoopContext.scratchCapacity)
        let bodyLeft = constant.write(
            keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: context.dateCache.headerLine, inlineBodyLimit: 16 << 10,
            into: &scratch)
        guard !scratch.overflowed else {
            write(constant.response, keepAlive: keepAlive, headRequest: headRequest, fields: nil)
            return
        }
        connection.write(scratch.written)
        if bodyLeft { connection.write(constant.response.bodyBytes) }
    }

    /// Sends `100 Continue` once the request being read is the first without a response.
    private func sendContinueIfNeeded() {
        guard continueState == .due, !closing, let current = incoming, slots.isEmpty || slots[0].sequence == current.sequence else { return }
        continueState = .sent
        connection.write(HTTPResponseSerializer.continueResponse)
    }

    /// A response answered in the loop turn that read its request is timed with that turn's clock
    /// (0 ns: no clock read); a later one, an async handler's, is timed precisely.
    private func report(method: HTTPMethod?, route: Route?, started: UInt64, status: HTTPStatus, to observer: any HTTPLoopObserver) {
        let now = connection.loop.iterationNanoseconds
        let ended = now == started ? now : EventLoop.monotonicNanoseconds()
        observer.requestCompleted(method: method, route: route, status: status, nanoseconds: ended &- started)
    }

    private func performUpgrade() {
        guard let (handler, request, requestContext) = pendingUpgrade else { return }
        pendingUpgrade = nil
        let first = slots[0]
        let action: HTTPUpgradeAction = quiescing
            ? .reject(.plain(.serviceUnavailable, "Shutting down"))
            : handler(request, requestContext, connection)
        switch action {
        case .accept(let response, let next):
            write(response, keepAlive: true, headRequest: false, fields: nil)
            if let observer = context.observer {
                report(method: first.method, route: first.route, started: first.started, status: response.status, to: observer)
            }
            slots.removeAll()
            handedOver = true
            closing = true
            deadlineKind = .none
            context.unregister(self)
            connection.handler = next
            let leftover = pendingInput
            pendingInput = []
            if !leftover.isEmpty {
                leftover.withUnsafeBytes { next.connection(connection, didRead: $0) }
            }
            if connection.isOpen { connection.resumeReading() }
        case .reject(let response):
            slots[0].upgradePending = false
            slots[0].response = response
            slots[0].keepAlive = false
            writeReadyResponses()
        }
    }

    // MARK: - Deadlines

    private func updateDeadline() {
        let wanted: Deadline
        if closed || handedOver {
            wanted = .none
        } else {
            switch parserPhase {
            case .head: wanted = closing ? .none : .head
            case .body: wanted = incoming != nil && !closing ? .body : .none
            case .idle: wanted = slots.isEmpty && !closing ? .idle : .none
            default: wanted = .none
            }
        }
        guard wanted != deadlineKind else { return }
        deadlineKind = wanted
        let timeout: UInt64
        switch wanted {
        case .none: return
        case .idle: timeout = core.idleTimeout
        case .head: timeout = core.headerTimeout
        case .body: timeout = core.bodyTimeout
        }
        deadline = EventLoop.monotonicNanoseconds() &+ timeout
    }

    /// Called by the loop's ticker.
    func checkDeadline(now: UInt64) {
        guard deadlineKind != .none, now >= deadline, !closed else { return }
        let kind = deadlineKind
        deadlineKind = .none
        switch kind {
        case .idle:
            closing = true
            connection.close()
        case .head, .body:
            fail(with: .plain(.requestTimeout), streamError: .timedOut)
        case .none:
            break
        }
    }
}
