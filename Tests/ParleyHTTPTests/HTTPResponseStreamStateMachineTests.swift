import XCTest
@testable import ParleyHTTP

/// The streamed-response writer without sockets: events in, actions out.
final class HTTPResponseStreamStateMachineTests: XCTestCase {
    private struct Failure: Error {}

    func testPullsOnlyWithRoomAndOneAtATime() {
        var machine = HTTPResponseStreamStateMachine(length: 6, closeDelimited: false)
        XCTAssertEqual(machine.outputQueued(300_000, lowWater: 256 << 10), .wait, "queue at the mark: no pull")
        XCTAssertEqual(machine.outputQueued(0, lowWater: 256 << 10), .pull)
        XCTAssertEqual(machine.outputQueued(0, lowWater: 256 << 10), .wait, "one next() in flight")
        XCTAssertEqual(machine.received(Array("abc".utf8)), .write(Array("abc".utf8)))
        XCTAssertEqual(machine.state, .idle(.length(3)))
        XCTAssertEqual(machine.outputQueued(3, lowWater: 256 << 10), .pull)
        XCTAssertEqual(machine.received(Array("def".utf8)), .write(Array("def".utf8)))
        XCTAssertEqual(machine.outputQueued(0, lowWater: 256 << 10), .pull)
        XCTAssertEqual(machine.received(nil), .finish(bytes: []))
        XCTAssertEqual(machine.state, .finished)
        XCTAssertEqual(machine.outputQueued(0, lowWater: 256 << 10), .wait, "nothing after the end")
        XCTAssertEqual(machine.received(Array("x".utf8)), .wait, "a chunk nobody asked for is ignored")
    }

    func testChunkedFramingAndLastChunk() {
        var machine = HTTPResponseStreamStateMachine(length: nil, closeDelimited: false)
        XCTAssertEqual(machine.outputQueued(0, lowWater: 10), .pull)
        XCTAssertEqual(machine.received([UInt8](repeating: 0x61, count: 26)), .write(Array("1a\r\n".utf8) + [UInt8](repeating: 0x61, count: 26) + [13, 10]))
        XCTAssertEqual(machine.outputQueued(0, lowWater: 10), .pull)
        XCTAssertEqual(machine.received([]), .write([]), "an empty chunk is not the last chunk")
        XCTAssertEqual(machine.outputQueued(0, lowWater: 10), .pull)
        XCTAssertEqual(machine.received(nil), .finish(bytes: Array("0\r\n\r\n".utf8)))
    }

    func testCloseDelimitedWritesRawBytes() {
        var machine = HTTPResponseStreamStateMachine(length: nil, closeDelimited: true)
        XCTAssertEqual(machine.outputQueued(0, lowWater: 10), .pull)
        XCTAssertEqual(machine.received(Array("raw".utf8)), .write(Array("raw".utf8)))
        XCTAssertEqual(machine.outputQueued(0, lowWater: 10), .pull)
        XCTAssertEqual(machine.received(nil), .finish(bytes: []))
    }

    func testLengthViolationsAndErrorsAbort() {
        var short = HTTPResponseStreamStateMachine(length: 5, closeDelimited: false)
        _ = short.outputQueued(0, lowWater: 10)
        _ = short.received(Array("abc".utf8))
        _ = short.outputQueued(0, lowWater: 10)
        XCTAssertEqual(short.received(nil), .abort("stream ended 2 bytes short of its Content-Length"))
        XCTAssertEqual(short.outputQueued(0, lowWater: 10), .wait)

        var long = HTTPResponseStreamStateMachine(length: 2, closeDelimited: false)
        _ = long.outputQueued(0, lowWater: 10)
        XCTAssertEqual(long.received(Array("abc".utf8)), .abort("stream longer than its Content-Length"))

        var throwing = HTTPResponseStreamStateMachine(length: nil, closeDelimited: false)
        XCTAssertEqual(throwing.failed(Failure()), .wait, "no pull in flight: nothing failed")
        _ = throwing.outputQueued(0, lowWater: 10)
        guard case .abort = throwing.failed(Failure()) else { return XCTFail("an error mid-stream aborts") }
        guard case .failed = throwing.state else { return XCTFail("\(throwing.state)") }
    }
}
