import ParleyNet
import XCTest
@testable import ParleyHTTP

/// The HTTP server connection without sockets or clocks: bytes and events in, actions out.
final class HTTPServerConnectionStateMachineTests: XCTestCase {
    /// Records each action of the machine as a line and answers the actions that need an answer.
    private struct Recorder: HTTPServerConnectionOutput {
        var log: [String] = []
        var now: UInt64 = 1
        var outboundBytes = 0
        var streams: [HTTPRequestBodyStream] = []
        var asyncRequests: [HTTPRequest] = []
        var upgradeDecision = HTTPUpgradeAction.reject(.plain(.badRequest))

        mutating func perform(_ action: HTTPServerConnectionAction) {
            switch action {
            case .write(let response, let write):
                var text = String(decoding: response.bodyBytes, as: UTF8.self)
                while text.last == "\n" { text.removeLast() }
                log.append("write \(response.status.code)\(write.keepAlive ? "" : " close")\(text.isEmpty ? "" : " " + text)")
            case .writeBytes(let bytes):
                log.append(bytes == HTTPResponseSerializer.continueResponse ? "continue" : "bytes \(String(decoding: bytes, as: UTF8.self))")
            case .callAsync(_, let request, _, _, let sequence):
                log.append("async \(sequence) \(request.path) \(request.body.count)")
                asyncRequests.append(request)
            case .finishBody(let stream):
                log.append("body end")
                stream.finish()
            case .failBody(let stream, let error):
                log.append("body failed \(error)")
                stream.fail(error)
            case .pullResponseChunk:
                log.append("pull")
            case .handOver(_, let leftover):
                log.append("hand over \(String(decoding: leftover, as: UTF8.self))")
            case .pauseReading:
                log.append("pause")
            case .resumeReading:
                log.append("resume")
            case .startDeadline(let timeout):
                log.append("deadline \(timeout)")
            case .close:
                log.append("close")
            case .closingAfter(let status):
                log.append("closing after \(status.code)")
            case .responseStreamFailed(let reason):
                log.append("stream failed \(reason)")
            }
        }

        mutating func writeConstant(_ constant: ConstantResponse, _ write: HTTPServerConnectionAction.Write) {
            log.append("constant \(constant.response.status.code)\(write.keepAlive ? "" : " close")")
        }

        mutating func callInline(_ handler: HTTPInlineHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPResponse {
            log.append("inline \(request.path)")
            return .plain(.ok, "inline")
        }

        mutating func attemptInline(_ attempt: HTTPInlineAttempt, _ request: HTTPRequest, sequence: UInt64) -> (taken: Bool, answer: HTTPResponse?) {
            log.append("attempt \(sequence)")
            return (false, nil)
        }

        mutating func startStreamedHandler(
            _ handler: @escaping HTTPHandler, _ head: HTTPRequestHead, route: Route, parameters: PathParameters, sequence: UInt64
        ) -> HTTPRequestBodyStream {
            log.append("streamed \(sequence) \(head.path)")
            let stream = HTTPRequestBodyStream(resumeReading: {})
            streams.append(stream)
            return stream
        }

        mutating func deliver(_ chunk: UnsafeRawBufferPointer, to stream: HTTPRequestBodyStream) -> Bool {
            log.append("body \(chunk.count)")
            return stream.append(chunk)
        }

        mutating func upgrade(_ handler: HTTPUpgradeHandler, _ request: HTTPRequest, route: Route, parameters: PathParameters) -> HTTPUpgradeAction {
            log.append("upgrade \(request.path)")
            return upgradeDecision
        }
    }

    /// The machine with a recorder, and shorthands for feeding it.
    private final class Driver {
        var machine: HTTPServerConnectionStateMachine<Recorder>

        init(_ configure: (Router) -> Void, pipeline: Int = 16) {
            let router = Router()
            configure(router)
            machine = HTTPServerConnectionStateMachine(
                configuration: .init(
                    routes: router.makeTable(), parserLimits: HTTPParserLimits(), maxBodyBytes: 1 << 20,
                    bodyTooLarge: .plain(.contentTooLarge), maxPipelinedRequests: pipeline, outboundHighWater: 1 << 20,
                    streamLowWater: 1000, idleTimeout: 10, headerTimeout: 20, bodyTimeout: 30),
                output: Recorder())
        }

        /// The actions since the last call.
        func take() -> [String] {
            defer { machine.output.log = [] }
            return machine.output.log
        }

        var streams: [HTTPRequestBodyStream] { machine.output.streams }
        var asyncRequests: [HTTPRequest] { machine.output.asyncRequests }
        var heldBytes: Int { machine.held.count }

        var outbound: Int {
            get { machine.output.outboundBytes }
            set { machine.output.outboundBytes = newValue }
        }

        func read(_ text: String) { read(Array(text.utf8)) }

        func read(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { machine.read($0) }
        }

        func answer(_ sequence: UInt64, _ response: HTTPResponse = .plain(.ok, "async")) {
            machine.handlerAnswered(sequence, response)
        }
    }

    private final class NextHandler: ConnectionHandler {
        func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {}
        func connectionDidClose(_ connection: Connection) {}
    }

    private static func routes(_ router: Router) {
        router.constant(.get, "/health", response: .plain(.ok, "ok"))
        router.inline(.get, "/inline") { _, _ in .plain(.ok) }
        router.get("/async") { _, _ in .plain(.ok) }
        router.post("/async") { _, _ in .plain(.ok) }
        router.on(.post, "/upload", body: .streamed()) { _, _ in .plain(.ok) }
        router.on(.post, "/small", body: .buffered(limit: 4)) { _, _ in .plain(.ok) }
        router.on(.get, "/attempt", inline: { _, _ in false }, else: { _, _ in .plain(.ok) })
        router.upgrade("/ws") { _, _, _ in .reject(.plain(.badRequest)) }
    }

    private static let upgradeHead = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"

    func testIdleDeadlineAtStartAndConstantRouteAnsweredAtOnce() {
        let driver = Driver(Self.routes)
        XCTAssertEqual(driver.take(), ["deadline 10"])
        driver.read("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(driver.take(), ["constant 200", "deadline 10"], "answered in the read: the idle time starts again")
        driver.read("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(driver.take(), ["constant 200 close", "close"])
        XCTAssertEqual(driver.machine.lifecycle, .closing)
    }

    func testInlineRouteAndNotFoundAndMethodNotAllowed() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /inline HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nDELETE /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["inline /inline", "write 200 inline", "deadline 10", "write 404 Not Found", "deadline 10",
                                        "write 405 Method Not Allowed", "deadline 10"])
    }

    func testPipelinedAnswersAreWrittenInRequestOrder() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nGET /async HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["async 0 /async 0", "async 1 /async 0"], "the constant answer waits behind them")
        XCTAssertEqual(driver.machine.deadline, .none, "no idle deadline while handlers run")
        driver.answer(1, .plain(.ok, "second"))
        XCTAssertEqual(driver.take(), [], "the second answer waits for the first")
        driver.answer(0, .plain(.ok, "first"))
        XCTAssertEqual(driver.take(), ["write 200 first", "write 200 second", "constant 200", "deadline 10"])
        driver.answer(0)
        XCTAssertEqual(driver.take(), [], "a second answer for a written request is ignored")
    }

    func testPipelineBoundHoldsInputAndResumes() {
        let driver = Driver(Self.routes, pipeline: 2)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nGET /async HTTP/1.1\r\n\r\nGET /async HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["async 0 /async 0", "async 1 /async 0", "pause"])
        XCTAssertTrue(driver.machine.readsPaused)
        XCTAssertEqual(driver.heldBytes, 23)
        driver.read("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["pause"], "bytes read while paused are held too")
        driver.answer(0)
        XCTAssertEqual(driver.take(), ["write 200 async", "async 2 /async 0", "pause"], "one place freed: one more request read")
        driver.answer(1)
        driver.answer(2)
        XCTAssertEqual(driver.take(), ["write 200 async", "pause", "write 200 async", "constant 200", "resume", "deadline 10"],
                       "the held request fills the queue again: reads resume once it is answered")
        XCTAssertEqual(driver.heldBytes, 0)
    }

    func testFloodOfPipelinedRequestsIsReadInBoundedBatches() {
        let driver = Driver(Self.routes, pipeline: 4)
        _ = driver.take()
        let request = "GET /async HTTP/1.1\r\n\r\n"
        driver.read(String(repeating: request, count: 1000))
        XCTAssertEqual(driver.take().filter { $0.hasPrefix("async") }.count, 4, "no more than the bound is started")
        XCTAssertEqual(driver.machine.slots.count, 4)
        XCTAssertEqual(driver.heldBytes, 996 * request.utf8.count)
        var answered: UInt64 = 0
        var written = 0
        while answered < 1000 {
            driver.answer(answered)
            answered += 1
            let actions = driver.take()
            written += actions.filter { $0.hasPrefix("write 200") }.count
            XCTAssertLessThanOrEqual(driver.machine.slots.count, 4)
        }
        XCTAssertEqual(written, 1000, "every request answered, in order")
        XCTAssertEqual(driver.heldBytes, 0)
        XCTAssertFalse(driver.machine.readsPaused)
    }

    func testOutputBacklogPausesReadingUntilItDrains() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.outbound = 2 << 20
        driver.read("GET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["pause"])
        driver.outbound = 0
        driver.machine.outputDrained()
        XCTAssertEqual(driver.take(), ["constant 200", "deadline 10", "resume"])
    }

    func testBufferedBodyIsCollectedAcrossReads() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /async HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234")
        XCTAssertEqual(driver.take(), ["deadline 30"])
        driver.read("56789")
        XCTAssertEqual(driver.take(), ["async 0 /async 10"])
        XCTAssertEqual(driver.asyncRequests.first?.body, Array("0123456789".utf8))
    }

    func testBodyOverTheRouteLimitIsRefusedBeforeItIsRead() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /small HTTP/1.1\r\nContent-Length: 5\r\n\r\n12345")
        XCTAssertEqual(driver.take(), ["pause", "write 413 close Content Too Large", "close"])
    }

    func testChunkedBodyOverTheLimitFailsWhileArriving() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /small HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n")
        let actions = driver.take()
        XCTAssertEqual(Array(actions.suffix(4)), ["pause", "closing after 413", "write 413 close Content Too Large", "close"])
    }

    func testStreamedBodyPausesReadsUntilTheConsumerCatchesUp() async throws {
        let driver = Driver(Self.routes)
        _ = driver.take()
        let size = HTTPRequestBodyStream.highWater + 1000
        driver.read("POST /upload HTTP/1.1\r\nContent-Length: \(size + 4)\r\n\r\n")
        XCTAssertEqual(driver.take(), ["streamed 0 /upload", "deadline 30"])
        driver.read([UInt8](repeating: 0x61, count: size))
        XCTAssertEqual(driver.take(), ["body \(size)", "pause"], "over the mark: reads pause")
        driver.read("abcd")
        XCTAssertEqual(driver.take(), ["pause"])
        XCTAssertEqual(driver.heldBytes, 4)
        let stream = try XCTUnwrap(driver.streams.first)
        let chunk = try await stream.next()
        XCTAssertEqual(chunk?.count, size)
        driver.machine.bodyStreamDrained()
        XCTAssertEqual(driver.take(), ["body 4", "body end", "resume"])
        let rest = try await stream.next()
        XCTAssertEqual(rest, Array("abcd".utf8))
        let end = try await stream.next()
        XCTAssertNil(end)
    }

    func testStreamingHandlerAnsweringEarlyAbandonsTheBody() async {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /upload HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc")
        XCTAssertEqual(driver.take(), ["streamed 0 /upload", "body 3", "deadline 30"])
        driver.answer(0, .plain(.ok, "early"))
        XCTAssertEqual(driver.take(), ["body failed abandoned", "pause", "write 200 close early", "close"])
        driver.read("more")
        XCTAssertEqual(driver.take(), [], "nothing more is read")
    }

    func testHandlerAnsweringAfterThePeerHalfClosed() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nGET /asy")
        XCTAssertEqual(driver.take(), ["async 0 /async 0", "deadline 20"])
        driver.machine.peerClosedInput()
        XCTAssertEqual(driver.take(), [], "the partial request is dropped; the complete one is still answered")
        driver.answer(0)
        XCTAssertEqual(driver.take(), ["write 200 close async", "close"])
    }

    func testHandlerAnsweringAfterTheConnectionClosed() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /upload HTTP/1.1\r\nContent-Length: 10\r\n\r\nab")
        _ = driver.take()
        driver.machine.connectionClosed()
        XCTAssertEqual(driver.take(), ["body failed incomplete"])
        driver.answer(0)
        driver.machine.deadlinePassed()
        driver.machine.outputDrained()
        XCTAssertEqual(driver.take(), [])
        XCTAssertEqual(driver.machine.lifecycle, .closed)
    }

    func testUpgradeHandsOverWithTheBytesReadPastTheRequest() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        var response = HTTPResponse(status: .init(101))
        response.headers.add("Upgrade", "websocket")
        driver.machine.output.upgradeDecision = .accept(response, NextHandler())
        driver.read(Self.upgradeHead + "frame-bytes")
        XCTAssertEqual(driver.take(), ["pause", "upgrade /ws", "write 101", "hand over frame-bytes"])
        XCTAssertEqual(driver.machine.lifecycle, .handedOver)
        XCTAssertEqual(driver.machine.deadline, .none)
        XCTAssertEqual(driver.heldBytes, 0)
        driver.read("late")
        XCTAssertEqual(driver.take(), [], "the connection belongs to the next protocol")
    }

    func testUpgradeBehindAnAnswerWaitsAndHoldsItsBytes() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.machine.output.upgradeDecision = .accept(HTTPResponse(status: .init(101)), NextHandler())
        driver.read("GET /async HTTP/1.1\r\n\r\n" + Self.upgradeHead + "early")
        XCTAssertEqual(driver.take(), ["async 0 /async 0", "pause"])
        driver.read("-later")
        XCTAssertEqual(driver.take(), ["pause"], "held for the next protocol")
        driver.answer(0)
        XCTAssertEqual(driver.take(), ["write 200 async", "upgrade /ws", "write 101", "hand over early-later"])
    }

    func testUpgradeCanBeRejected() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read(Self.upgradeHead)
        XCTAssertEqual(driver.take(), ["pause", "upgrade /ws", "write 400 close Bad Request", "close"])
    }

    func testUpgradeRouteWithoutUpgradeHeadersGets426() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /ws HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["write 426 Upgrade Required", "deadline 10"])
    }

    func testHeadDeadlineAnswers408AndCloses() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /hea")
        XCTAssertEqual(driver.take(), ["deadline 20"])
        driver.machine.deadlinePassed()
        XCTAssertEqual(driver.take(), ["pause", "closing after 408", "write 408 close Request Timeout", "close"])
    }

    func testEveryRequestRestartsTheIdleDeadline() {
        let driver = Driver(Self.routes)
        XCTAssertEqual(driver.take(), ["deadline 10"])
        driver.read("GET /inline HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["inline /inline", "write 200 inline", "deadline 10"])
        driver.read("GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["constant 200", "deadline 10", "constant 200", "deadline 10"], "a restart per request")
        driver.read("GET /inl")
        XCTAssertEqual(driver.take(), ["deadline 20"], "a head arriving has its own deadline")
        driver.read("ine HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["inline /inline", "write 200 inline", "deadline 10"])
        driver.machine.deadlinePassed()
        XCTAssertEqual(driver.take(), ["close"], "an idle connection still closes at its deadline")
    }

    func testIdleDeadlineCloses() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.machine.deadlinePassed()
        XCTAssertEqual(driver.take(), ["close"])
        XCTAssertEqual(driver.machine.deadline, .none)
    }

    func testStreamedBodyDeadlineFailsTheStream() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /upload HTTP/1.1\r\nContent-Length: 10\r\n\r\nab")
        _ = driver.take()
        driver.machine.deadlinePassed()
        XCTAssertEqual(driver.take(), ["pause", "body failed timedOut", "closing after 408"], "the handler's own answer is the last")
        driver.answer(0, .plain(.requestTimeout))
        XCTAssertEqual(driver.take(), ["write 408 close Request Timeout", "close"])
    }

    func testMalformedRequestAnswers400AfterWhatIsQueued() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nGET / HTTP/9.9\r\n\r\n")
        let actions = driver.take()
        XCTAssertEqual(actions.first, "async 0 /async 0")
        XCTAssertTrue(actions.contains("pause"))
        XCTAssertFalse(actions.contains { $0.hasPrefix("write") }, "the error answer waits behind the first")
        driver.answer(0)
        let written = driver.take()
        XCTAssertEqual(written.first, "write 200 async")
        XCTAssertTrue(written[1].hasPrefix("write 505 close") || written[1].hasPrefix("write 400 close"), "\(written)")
        XCTAssertEqual(written.last, "close")
    }

    func testExpectContinueIsSentOnceTheRequestIsFirst() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nPOST /async HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        XCTAssertEqual(driver.take(), ["async 0 /async 0", "deadline 30"], "no 100 while an earlier answer is due")
        driver.answer(0)
        XCTAssertEqual(driver.take(), ["write 200 async", "continue"])
        driver.read("hi")
        XCTAssertEqual(driver.take(), ["async 1 /async 2"])
    }

    func testExpectContinueToAnUnknownRouteAnswersWithoutReadingTheBody() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("POST /nope HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        XCTAssertEqual(driver.take(), ["write 404 close Not Found", "close"])
    }

    func testInlineAttemptDecliningRunsTheAsyncHandler() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /attempt HTTP/1.1\r\n\r\n")
        XCTAssertEqual(driver.take(), ["attempt 0", "async 0 /attempt 0"])
        driver.answer(0)
        XCTAssertEqual(driver.take(), ["write 200 async", "deadline 10"])
    }

    func testStreamedResponsePullsWithRoomAndFinishes() {
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        _ = driver.take()
        driver.answer(0, HTTPResponse(body: .stream(length: nil, next: { nil })))
        XCTAssertEqual(driver.take(), ["write 200", "pull"])
        driver.outbound = 5000
        driver.machine.responseChunk(.success(Array("abc".utf8)))
        XCTAssertEqual(driver.take(), ["bytes 3\r\nabc\r\n"], "no pull while the output is over the mark")
        driver.outbound = 0
        driver.machine.outputDrained()
        XCTAssertEqual(driver.take(), ["pull"])
        driver.machine.responseChunk(.success(nil))
        XCTAssertEqual(driver.take(), ["bytes 0\r\n\r\n", "constant 200", "deadline 10"], "the next answer follows the stream")
    }

    func testStreamedResponseFailingClosesTheConnection() {
        struct Broken: Error {}
        let driver = Driver(Self.routes)
        _ = driver.take()
        driver.read("GET /async HTTP/1.1\r\n\r\n")
        _ = driver.take()
        driver.answer(0, HTTPResponse(body: .stream(length: 10, next: { nil })))
        XCTAssertEqual(driver.take(), ["write 200", "pull"])
        driver.machine.responseChunk(.success(nil))
        XCTAssertEqual(driver.take(), ["stream failed stream ended 10 bytes short of its Content-Length", "close"])
    }

    func testQuiesceClosesAnIdleConnectionAndRejectsUpgrades() {
        let idle = Driver(Self.routes)
        _ = idle.take()
        idle.machine.quiesce()
        XCTAssertEqual(idle.take(), ["close"])

        let busy = Driver(Self.routes)
        _ = busy.take()
        busy.read("GET /async HTTP/1.1\r\n\r\n" + Self.upgradeHead)
        _ = busy.take()
        busy.machine.quiesce()
        busy.answer(0)
        XCTAssertEqual(busy.take(), ["write 200 async", "write 503 close Shutting down", "close"])
    }
}
