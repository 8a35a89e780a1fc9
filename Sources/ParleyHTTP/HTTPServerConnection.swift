import ParleyLog
import ParleyNet

/// Runs one connection's `HTTPServerConnectionStateMachine` on its socket and event loop: feeds
/// it what the socket reports (bytes, drained output, end of input, close), the loop's ticks
/// and the handlers' answers, and carries out the actions it returns (`Executor`: writes, handler
/// calls and tasks, body stream hand-offs, read pausing, deadlines, the switch to another protocol).
///
/// Owned by the connection's loop thread; `@unchecked Sendable` only so async handlers' tasks
/// (pinned to that loop) can hand their response back. `respond` re-enters through the loop.
final class HTTPServerConnection: ConnectionHandler, @unchecked Sendable {
    /// Queued output below which the next chunk of a streamed body is pulled.
    static let streamLowWater = 256 << 10

    /// The machine's output on a real connection.
    struct Executor: HTTPServerConnectionOutput {
        let connection: Connection
        let core: HTTPServerCore
        let context: HTTPLoopContext
        /// The connection object, for tasks and callbacks (it owns the machine, hence unowned).
        unowned(unsafe) var owner: HTTPServerConnection?
        /// When the machine's current deadline passes.
        var deadline: UInt64 = 0

        var now: UInt64 { connection.loop.iterationNanoseconds }
        var outboundBytes: Int { connection.pendingOutboundBytes }

        @inline(__always)
        mutating func perform(_ action: HTTPServerConnectionAction) {
            switch action {
            case .write(let response, let write):
                let fields = write.cachesFields
                    ? context.serializedFields(of: response.headers, switching: response.status.code == 101) : nil
                self.write(response, keepAlive: write.keepAlive, headRequest: write.headRequest, fields: fields, closeDelimited: write.closeDelimited)
                if let observer = context.observer {
                    report(method: write.method, route: write.route, started: write.started, status: response.status, to: observer)
                }
            case .writeBytes(let bytes):
                connection.write(bytes)
            case .callAsync(let handler, let request, let route, let parameters, let sequence):
                runAsync(handler, request, makeContext(route, parameters), sequence: sequence)
            case .finishBody(let stream):
                stream.finish()
            case .failBody(let stream, let error):
                stream.fail(error)
            case .pullResponseChunk(let next):
                let owner = self.owner!
                Task(executorPreference: connection.loop) {
                    let result: Result<[UInt8]?, any Error>
                    do {
                        result = .success(try await next())
                    } catch {
                        result = .failure(error)
                    }
                    owner.streamed(result)
                }
            case .handOver(let next, let leftover):
                if let owner { context.unregister(owner) }
                connection.handler = next
                if !leftover.isEmpty {
                    leftover.withUnsafeBytes { next.connection(connection, didRead: $0) }
                }
                if connection.isOpen { connection.resumeReading() }
            case .pauseReading:
                connection.pauseReading()
            case .resumeReading:
                connection.resumeReading()
            case .startDeadline(let timeout):
                // The loop turn's clock: re-armed after every request, a clock read each would show.
                deadline = now &+ timeout
            case .close:
                connection.close()
            case .closingAfter(let status):
                core.logger.debug("closing after \(status)", [("connection", String(connection.id)), ("peer", connection.remoteAddress)])
            case .responseStreamFailed(let reason):
                core.logger.error("response stream failed", [("connection", String(connection.id)), ("error", reason)])
            }
        }

        @inline(__always)
        func writeConstant(_ constant: ConstantResponse, _ write: HTTPServerConnectionAction.Write) {
            self.write(constant, keepAlive: write.keepAlive, headRequest: write.headRequest)
            if let observer = context.observer {
                report(method: write.method, route: write.route, started: write.started, status: constant.response.status, to: observer)
            }
        }

        func callInline(_ handler: HTTPInlineHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPResponse {
            handler(request, makeContext(route, parameters))
        }

        func attemptInline(_ attempt: HTTPInlineAttempt, _ request: HTTPRequest, sequence: UInt64) -> (taken: Bool, answer: HTTPResponse?) {
            // The answer given at once is kept by the connection object (not in the machine, which is
            // busy with this event) and handed back here.
            let owner = self.owner!
            owner.attemptSequence = sequence
            let taken = attempt(request, HTTPResponder(connection: owner, sequence: sequence))
            owner.attemptSequence = nil
            return (taken, owner.attemptAnswer.take())
        }

        func startStreamedHandler(
            _ handler: @escaping HTTPHandler, _ head: HTTPRequestHead, route: Route, parameters: PathParameters, sequence: UInt64
        ) -> HTTPRequestBodyStream {
            let loop = connection.loop
            let stream = HTTPRequestBodyStream { [weak owner] in
                guard let connection = owner else { return }
                loop.execute { connection.bodyStreamDrained() }
            }
            runAsync(handler, HTTPRequest(head: head, parameters: parameters, bodyStream: stream), makeContext(route, parameters), sequence: sequence)
            return stream
        }

        func deliver(_ chunk: UnsafeRawBufferPointer, to stream: HTTPRequestBodyStream) -> Bool {
            stream.append(chunk)
        }

        var sendsFiles: Bool { connection.tlsSession == nil }

        func sendFile(_ region: FileRegion, from offset: Int, count: Int) -> FileWriteResult {
            connection.writeFile(region.fd, offset: offset, count: count)
        }

        func upgrade(_ handler: HTTPUpgradeHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPUpgradeAction {
            handler(request, makeContext(route, parameters), connection)
        }

        private func makeContext(_ route: Route, _ parameters: PathParameters) -> RequestContext {
            RequestContext(
                parameters: parameters, route: route.pattern, requestID: context.nextRequestID(),
                remoteAddress: connection.remoteAddress, loop: connection.loop, logger: core.logger)
        }

        private func runAsync(_ handler: @escaping HTTPHandler, _ request: HTTPRequest, _ requestContext: RequestContext, sequence: UInt64) {
            let core = self.core
            let owner = self.owner!
            Task(executorPreference: connection.loop) {
                let response: HTTPResponse
                do {
                    response = try await handler(request, requestContext)
                } catch {
                    response = core.response(for: error, context: requestContext)
                }
                owner.respond(sequence, response)
            }
        }

        /// Writes `response`; `fields` are its header fields from the loop's cache, if there.
        /// A streamed body is not written here (only its head).
        func write(_ response: HTTPResponse, keepAlive: Bool, headRequest: Bool, fields: SerializedFields?, closeDelimited: Bool = false) {
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

        func write(_ constant: ConstantResponse, keepAlive: Bool, headRequest: Bool) {
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

        /// A response answered in the loop turn that read its request is timed with that turn's clock
        /// (0 ns: no clock read); a later one, an async handler's, is timed precisely.
        @inline(__always)
        func report(method: HTTPMethod?, route: Route?, started: UInt64, status: HTTPStatus, to observer: any HTTPLoopObserver) {
            let now = connection.loop.iterationNanoseconds
            let ended = now == started ? now : EventLoop.monotonicNanoseconds()
            observer.requestCompleted(method: method, route: route, status: status, nanoseconds: ended &- started)
        }

    }

    private let connection: Connection
    private var machine: HTTPServerConnectionStateMachine<Executor>
    /// While an inline attempt runs: its request's sequence, and the answer if it gives one at once.
    fileprivate var attemptSequence: UInt64?
    fileprivate var attemptAnswer: HTTPResponse?

    init(connection: Connection, core: HTTPServerCore, context: HTTPLoopContext) {
        self.connection = connection
        machine = HTTPServerConnectionStateMachine(
            configuration: core.machineConfiguration, output: Executor(connection: connection, core: core, context: context))
        machine.output.owner = self
        context.register(self)
    }

    // MARK: - ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        machine.read(bytes)
    }

    func connectionDidDrain(_ connection: Connection) {
        machine.outputDrained()
    }

    func connectionDidReceiveEOF(_ connection: Connection) {
        machine.peerClosedInput()
    }

    func connectionDidClose(_ connection: Connection) {
        machine.connectionClosed()
        machine.output.context.unregister(self)
    }

    func connectionShouldQuiesce(_ connection: Connection) {
        machine.quiesce()
    }

    /// Called by the loop's ticker.
    func checkDeadline(now: UInt64) {
        guard machine.deadline != .none, now >= machine.output.deadline else { return }
        machine.deadlinePassed()
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
            machine.handlerAnswered(sequence, response)
        }
    }

    /// A streamed body's consumer took what was buffered: reads may resume.
    fileprivate func bodyStreamDrained() {
        machine.bodyStreamDrained()
    }

    /// A chunk (or the end, or an error) of the streamed response first in the queue.
    fileprivate func streamed(_ result: Result<[UInt8]?, any Error>) {
        guard connection.loop.inEventLoop else {
            connection.loop.execute { self.streamed(result) }
            return
        }
        machine.responseChunk(result)
    }
}
