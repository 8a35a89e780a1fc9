import ParleyLog
import ParleyNet

/// One connection's HTTP state: parser, the queue of requests awaiting their responses (in
/// request order), deadlines, and the switch to another protocol.
///
/// Owned by the connection's loop thread; `@unchecked Sendable` only so async handlers' tasks
/// (pinned to that loop) can hand their response back. `complete` re-enters through the loop.
final class HTTPServerConnection: ConnectionHandler, @unchecked Sendable {
    /// A request read (or being read) whose response is not written yet.
    private struct Slot {
        let sequence: UInt64
        let head: HTTPRequestHead?
        var match: RouteMatch?
        var response: HTTPResponse?
        var keepAlive: Bool
        let started: UInt64
        var needsContinue = false
        var continueSent = false
        var upgradePending = false
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
    /// The body of the request being read (the last slot while `readingRequest`).
    private var body: [UInt8] = []
    private var readingRequest = false
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
    private var deadlineKind = Deadline.none
    private var deadline: UInt64 = 0

    init(connection: Connection, core: HTTPServerCore, context: HTTPLoopContext) {
        self.connection = connection
        self.core = core
        self.context = context
        self.parser = HTTPRequestParser(limits: core.configuration.limits)
        context.register(self)
        updateDeadline()
    }

    // MARK: - ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed, !closing else { return }
        if parsingPaused || parser.isUpgraded {
            pendingInput.append(contentsOf: bytes)
            connection.pauseReading()
            return
        }
        parse(bytes)
        updateDeadline()
    }

    func connectionDidDrain(_ connection: Connection) {
        if parsingPaused { resumeParsingIfPossible() }
    }

    func connectionDidReceiveEOF(_ connection: Connection) {
        guard !closed else { return }
        peerClosed = true
        // Requests still held back (pipelining bound) are answered first.
        if !parsingPaused { finishAfterPeerClosed() }
    }

    /// A half-closed client may still read: answer every complete request, drop a partial one.
    private func finishAfterPeerClosed() {
        if readingRequest, let last = slots.last, last.response == nil {
            slots.removeLast()
            readingRequest = false
        }
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
        pendingInput = []
        pendingUpgrade = nil
        context.unregister(self)
    }

    func connectionShouldQuiesce(_ connection: Connection) {
        guard !closed else { return }
        quiescing = true
        switch parser.phase {
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
        if parser.isUpgraded { writeReadyResponses() }
    }

    private func parseEvents(_ input: UnsafeRawBufferPointer) {
        parsing = true
        defer { parsing = false }
        var offset = 0
        do {
            while !closed && !closing {
                if parser.phase == .idle && mustPauseBeforeNextRequest() {
                    pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                    parsingPaused = true
                    connection.pauseReading()
                    return
                }
                let (event, consumed) = try parser.nextEvent(in: UnsafeRawBufferPointer(rebasing: input[offset...]))
                offset += consumed
                guard let event else {
                    if parser.isUpgraded {
                        pendingInput.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset...]))
                        connection.pauseReading()
                    }
                    break
                }
                switch event {
                case .head(let head): receivedHead(head)
                case .body(let chunk): body.append(contentsOf: chunk)
                case .end: receivedEnd()
                }
            }
        } catch {
            fail(with: .plain(error.status, error.description), method: nil)
        }
    }

    private func mustPauseBeforeNextRequest() -> Bool {
        slots.count >= core.configuration.maxPipelinedRequests
            || connection.pendingOutboundBytes > core.configuration.outboundHighWater
    }

    private func resumeParsingIfPossible() {
        guard parsingPaused, !parsing, !closed, !closing, !mustPauseBeforeNextRequest() else { return }
        parsingPaused = false
        let input = pendingInput
        pendingInput = []
        if !input.isEmpty {
            input.withUnsafeBytes { parse($0) }
        }
        if peerClosed, !parsingPaused, !closed {
            finishAfterPeerClosed()
            return
        }
        if !parsingPaused, !closed, !closing, !parser.isUpgraded {
            connection.resumeReading()
        }
        updateDeadline()
    }

    private func receivedHead(_ head: HTTPRequestHead) {
        let match = core.routes.match(head)
        var slot = Slot(
            sequence: nextSequence, head: head, match: match, keepAlive: head.keepAlive,
            started: core.hasObserver ? EventLoop.monotonicNanoseconds() : 0)
        nextSequence &+= 1
        body = []
        if case .contentLength(let length) = head.bodyFraming, length > 0 {
            body.reserveCapacity(min(length, 64 << 10))
        }
        readingRequest = true
        if head.expectContinue && head.hasBody {
            if case .found = match {
                slot.needsContinue = true
            } else {
                // 404/405 before the body: answer now, never read the body, close.
                slot.response = responseForUnrouted(match)
                slot.keepAlive = false
                readingRequest = false
                closing = true
            }
        }
        slots.append(slot)
        if slots.count == 1 {
            sendContinueIfNeeded()
            if closing { writeReadyResponses() }
        }
    }

    private func receivedEnd() {
        readingRequest = false
        let index = slots.count - 1
        slots[index].needsContinue = false
        let sequence = slots[index].sequence
        guard let head = slots[index].head, let match = slots[index].match else { return }
        let requestBody = body
        body = []
        if !head.keepAlive || quiescing { closing = true }
        if head.isUpgrade {
            // The parser has stopped: unless a route takes the connection over, close after answering.
            if case .found(let route, _) = match, case .upgrade = route.handler {} else { closing = true }
        }
        switch match {
        case .notFound, .methodNotAllowed:
            complete(sequence, responseForUnrouted(match))
        case .found(let route, let parameters):
            let request = HTTPRequest(head: head, body: requestBody, parameters: parameters)
            let requestContext = RequestContext(
                parameters: parameters, route: route.pattern, requestID: context.nextRequestID(),
                remoteAddress: connection.remoteAddress, loop: connection.loop, logger: core.logger)
            switch route.handler {
            case .inline(let handler):
                complete(sequence, handler(request, requestContext))
            case .async(let handler):
                runAsync(handler, request, requestContext, sequence: sequence)
            case .upgrade(let handler):
                if head.isUpgrade {
                    pendingUpgrade = (handler, request, requestContext)
                    slots[index].upgradePending = true
                } else {
                    var response = HTTPResponse.plain(.init(426), "Upgrade Required")
                    response.headers.add("Connection", "Upgrade")
                    complete(sequence, response)
                }
            }
        }
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
            if loop.inEventLoop {
                self.complete(sequence, response)
            } else {
                loop.execute { self.complete(sequence, response) }
            }
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

    /// Answers with `response` after what is queued, then closes: parse errors and timeouts.
    private func fail(with response: HTTPResponse, method: HTTPMethod?) {
        guard !closed else { return }
        closing = true
        parsingPaused = false
        pendingInput = []
        connection.pauseReading()
        if readingRequest, let last = slots.indices.last {
            slots[last].response = response
            slots[last].match = nil
            slots[last].keepAlive = false
            slots[last].needsContinue = false
            readingRequest = false
        } else {
            slots.append(Slot(sequence: nextSequence, head: nil, response: response, keepAlive: false, started: EventLoop.monotonicNanoseconds()))
            nextSequence &+= 1
        }
        core.logger.debug("closing after \(response.status)", [("connection", String(connection.id)), ("peer", connection.remoteAddress)])
        writeReadyResponses()
        updateDeadline()
    }

    // MARK: - Writing

    private func complete(_ sequence: UInt64, _ response: HTTPResponse) {
        guard !closed, let first = slots.first, sequence >= first.sequence else { return }
        let index = Int(sequence - first.sequence)
        guard index < slots.count, slots[index].sequence == sequence, slots[index].response == nil else { return }
        slots[index].response = response
        if index == 0 { writeReadyResponses() }
    }

    /// Writes the responses at the front of the queue that are ready, in request order.
    private func writeReadyResponses() {
        while !closed, !slots.isEmpty {
            if slots[0].upgradePending {
                if parsing { return }
                performUpgrade()
                return
            }
            guard let response = slots[0].response else { break }
            let last = slots.count == 1
            let keepAlive = slots[0].keepAlive && !(closing && last)
                && (response.headers.isEmpty || !response.headers.containsToken("close", in: "Connection"))
            write(response, keepAlive: keepAlive, headRequest: slots[0].head?.method == .head)
            if core.hasObserver { report(slots[0], status: response.status) }
            if slots.count == 1 {
                slots.removeAll(keepingCapacity: true)
            } else {
                slots.removeFirst()
            }
            if !keepAlive {
                closing = true
                slots.removeAll()
                break
            }
            sendContinueIfNeeded()
        }
        guard !closed else { return }
        if slots.isEmpty && closing {
            connection.close()
            return
        }
        if parsingPaused { resumeParsingIfPossible() }
        updateDeadline()
    }

    private func write(_ response: HTTPResponse, keepAlive: Bool, headRequest: Bool) {
        var buffer = context.headBuffer
        context.headBuffer = []
        buffer.removeAll(keepingCapacity: true)
        HTTPResponseSerializer.writeHead(
            response, keepAlive: keepAlive, headRequest: headRequest, dateHeaderLine: context.dateCache.headerLine, into: &buffer)
        let sendsBody = HTTPResponseSerializer.sendsBody(response, headRequest: headRequest)
        if sendsBody && response.body.count <= 16 << 10 {
            buffer.append(contentsOf: response.body)
            connection.write(buffer)
        } else {
            connection.write(buffer)
            if sendsBody { connection.write(response.body) }
        }
        context.headBuffer = buffer
    }

    private func sendContinueIfNeeded() {
        guard let first = slots.first, first.needsContinue, !first.continueSent, !closing else { return }
        slots[0].continueSent = true
        connection.write(HTTPResponseSerializer.continueResponse)
    }

    private func report(_ slot: Slot, status: HTTPStatus) {
        guard let observer = core.observer else { return }
        var route: String?
        if case .found(let matched, _)? = slot.match { route = matched.pattern }
        let elapsed = EventLoop.monotonicNanoseconds() &- slot.started
        observer.requestCompleted(method: slot.head?.method, route: route, status: status, duration: .nanoseconds(Int64(elapsed)))
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
            write(response, keepAlive: true, headRequest: false)
            report(first, status: response.status)
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
            switch parser.phase {
            case .head: wanted = closing ? .none : .head
            case .body: wanted = readingRequest && !closing ? .body : .none
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
            fail(with: .plain(.requestTimeout), method: nil)
        case .none:
            break
        }
    }
}
