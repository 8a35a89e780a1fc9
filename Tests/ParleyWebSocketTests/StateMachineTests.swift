import XCTest
@testable import ParleyWebSocket

final class StateMachineTests: XCTestCase {
    typealias Action = WebSocketConnectionStateMachine.Action

    private var keySeed: UInt32 = 0x1234_5678

    /// A masked client frame.
    private func frame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        keySeed = keySeed &* 1_103_515_245 &+ 12345
        return WebSocketFrameEncoder.encode(opcode: opcode, fin: fin, payload: payload, maskingKey: keySeed)
    }

    private func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true) -> [UInt8] {
        frame(opcode, Array(text.utf8), fin: fin)
    }

    private func closePayload(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
        [UInt8(code >> 8), UInt8(code & 0xFF)] + reason
    }

    /// The single server frame inside a `.send` action.
    private func sentFrame(_ action: Action?, file: StaticString = #filePath, line: UInt = #line) -> DecodedFrame? {
        guard case .send(let bytes)? = action else {
            XCTFail("expected a send, got \(String(describing: action))", file: file, line: line)
            return nil
        }
        var collector = FrameCollector(expectsMaskedFrames: false)
        XCTAssertNoThrow(try collector.feed(bytes), file: file, line: line)
        XCTAssertEqual(collector.frames.count, 1, file: file, line: line)
        return collector.frames.first
    }

    /// Asserts the actions are: close frame with `code`, then close the connection.
    private func assertFails(_ actions: [Action], with code: UInt16, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(actions.count, 2, "\(actions)", file: file, line: line)
        XCTAssertEqual(sentFrame(actions.first, file: file, line: line)?.closeCode, code, file: file, line: line)
        XCTAssertEqual(actions.last, .closeConnection, file: file, line: line)
    }

    // MARK: Messages

    func testSingleFrameMessages() {
        var machine = WebSocketConnectionStateMachine()
        XCTAssertEqual(machine.receive(frame(.text, "hello")), [.deliverText("hello")])
        XCTAssertEqual(machine.receive(frame(.binary, [1, 2, 3])), [.deliverBinary([1, 2, 3])])
        XCTAssertEqual(machine.receive(frame(.text, "")), [.deliverText("")])
        XCTAssertEqual(machine.state, .open)
        XCTAssertEqual(machine.bufferedBytes, 0, "no buffer is kept between messages")
    }

    func testFragmentedMessageWithInterleavedPings() {
        var machine = WebSocketConnectionStateMachine()
        XCTAssertEqual(machine.receive(frame(.text, "frag", fin: false)), [])
        XCTAssertGreaterThan(machine.bufferedBytes, 0, "reassembly buffer exists while a message is in flight")
        let pong = machine.receive(frame(.ping, "p1"))
        XCTAssertEqual(sentFrame(pong.first), DecodedFrame(opcode: .pong, payload: Array("p1".utf8)))
        XCTAssertEqual(machine.receive(frame(.continuation, "men", fin: false)), [])
        XCTAssertEqual(machine.receive(frame(.pong, "unsolicited")), [.receivedPong(Array("unsolicited".utf8))])
        XCTAssertEqual(machine.receive(frame(.continuation, "ted")), [.deliverText("fragmented")])
        XCTAssertEqual(machine.bufferedBytes, 0)
        // Binary, with an empty first fragment.
        XCTAssertEqual(machine.receive(frame(.binary, [], fin: false) + frame(.continuation, [9], fin: false) + frame(.continuation, [8])),
                       [.deliverBinary([9, 8])])
    }

    func testCodePointSplitAcrossFragmentsIsValid() {
        let bytes = Array("€𝄞".utf8)
        for split in 0...bytes.count {
            var machine = WebSocketConnectionStateMachine()
            let actions = machine.receive(frame(.text, Array(bytes[..<split]), fin: false) + frame(.continuation, Array(bytes[split...])))
            XCTAssertEqual(actions, [.deliverText("€𝄞")], "split at \(split)")
        }
    }

    func testWholeConversationSplitAtEveryByte() {
        let stream = frame(.text, "he", fin: false) + frame(.ping, "x") + frame(.continuation, "llo €") + frame(.binary, [1, 2])
            + frame(.close, closePayload(1000, Array("done".utf8)))
        var expected: [Action]?
        for split in 0...stream.count {
            var machine = WebSocketConnectionStateMachine()
            let actions = machine.receive(Array(stream[..<split])) + machine.receive(Array(stream[split...]))
            if let expected { XCTAssertEqual(actions, expected, "split at \(split)") } else { expected = actions }
            XCTAssertEqual(machine.state, .closed)
            XCTAssertEqual(machine.receivedClose, WebSocketCloseStatus(code: .normalClosure, reason: "done"))
        }
        XCTAssertEqual(expected?.count, 5)  // pong, text, binary, close echo, close connection
        XCTAssertEqual(expected?[1], .deliverText("hello €"))
    }

    // MARK: Errors

    func testInvalidUTF8FailsFastWith1007() {
        var machine = WebSocketConnectionStateMachine()
        // The first fragment is already invalid: fail before the rest arrives.
        assertFails(machine.receive(frame(.text, [0x41, 0xC0, 0x80], fin: false)), with: 1007)
        XCTAssertEqual(machine.failure, .invalidUTF8)
        XCTAssertEqual(machine.receive(frame(.continuation, "ignored")), [], "nothing after failing")

        // Inside one frame that arrives in pieces: fail at the piece with the bad byte.
        machine = WebSocketConnectionStateMachine()
        let bytes = frame(.text, Array("valid then ".utf8) + [0xED, 0xA0, 0x80] + Array("more".utf8))
        let header = WebSocketFrameHeader.size(payloadLength: 18, masked: true)
        XCTAssertEqual(machine.receive(Array(bytes[..<(header + 12)])), [])
        assertFails(machine.receive(Array(bytes[(header + 12)..<(header + 13)])), with: 1007)
    }

    func testTruncatedCodePointAtMessageEndFailsWith1007() {
        var machine = WebSocketConnectionStateMachine()
        XCTAssertEqual(machine.receive(frame(.text, [0xE2, 0x82], fin: false)), [])
        assertFails(machine.receive(frame(.continuation, [])), with: 1007)
    }

    func testOversizedFrameAndMessageFailWith1009() {
        let limits = WebSocketConnectionStateMachine.Limits(maxFrameSize: 100, maxMessageSize: 150)
        var machine = WebSocketConnectionStateMachine(limits: limits)
        assertFails(machine.receive(Array(frame(.binary, [UInt8](repeating: 0, count: 101)).prefix(4))), with: 1009)

        machine = WebSocketConnectionStateMachine(limits: limits)
        XCTAssertEqual(machine.receive(frame(.binary, [UInt8](repeating: 0, count: 100), fin: false)), [])
        assertFails(machine.receive(frame(.continuation, [UInt8](repeating: 0, count: 51))), with: 1009)

        machine = WebSocketConnectionStateMachine(limits: limits)
        XCTAssertEqual(machine.receive(frame(.binary, [UInt8](repeating: 0, count: 100), fin: false)), [])
        XCTAssertEqual(machine.receive(frame(.continuation, [UInt8](repeating: 0, count: 50))).count, 1, "exactly at the limit is fine")
    }

    func testProtocolViolationsFailWith1002() {
        let cases: [(String, [UInt8])] = [
            ("reserved opcode 3", [0x83, 0x80, 1, 2, 3, 4]),
            ("reserved opcode 11", [0x8B, 0x80, 1, 2, 3, 4]),
            ("RSV1", [0xC1, 0x80, 1, 2, 3, 4]),
            ("RSV3", [0x91, 0x80, 1, 2, 3, 4]),
            ("unmasked", [0x81, 0x01, 0x41]),
            ("fragmented ping", frame(.ping, "x", fin: false)),
            ("ping over 125", [0x89, 0xFE, 0x00, 0x7E]),
            ("continuation without message", frame(.continuation, "x")),
            ("text inside fragmented message", frame(.text, "a", fin: false) + frame(.text, "b")),
            ("binary inside fragmented message", frame(.binary, [1], fin: false) + frame(.binary, [2])),
        ]
        for (name, bytes) in cases {
            var machine = WebSocketConnectionStateMachine()
            assertFails(machine.receive(bytes), with: 1002)
            XCTAssertEqual(machine.state, .closed, name)
        }
    }

    func testMessagesBeforeAnErrorAreDeliveredFirst() {
        var machine = WebSocketConnectionStateMachine()
        let bytes = frame(.text, "first") + [0xA1, 0x80, 1, 2, 3, 4] + frame(.ping, "never")
        let actions = machine.receive(bytes)
        XCTAssertEqual(actions.first, .deliverText("first"))
        assertFails(Array(actions.dropFirst()), with: 1002)
    }

    // MARK: Close handshake

    func testValidCloseCodesAreEchoed() {
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] {
            var machine = WebSocketConnectionStateMachine()
            let actions = machine.receive(frame(.close, closePayload(code, Array("why".utf8))))
            XCTAssertEqual(actions.count, 2)
            XCTAssertEqual(sentFrame(actions.first)?.closeCode, code)
            XCTAssertEqual(actions.last, .closeConnection)
            XCTAssertEqual(machine.receivedClose, WebSocketCloseStatus(code: WebSocketCloseCode(code), reason: "why"))
            XCTAssertEqual(machine.state, .closed)
        }
    }

    func testInvalidCloseCodesFailWith1002() {
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] {
            var machine = WebSocketConnectionStateMachine()
            assertFails(machine.receive(frame(.close, closePayload(code))), with: 1002)
            XCTAssertEqual(machine.failure, .invalidCloseCode(code))
        }
    }

    func testMalformedClosePayloads() {
        var machine = WebSocketConnectionStateMachine()
        assertFails(machine.receive(frame(.close, [0x03])), with: 1002)
        machine = WebSocketConnectionStateMachine()
        assertFails(machine.receive(frame(.close, closePayload(1000, [0xCE, 0xBA, 0xFF]))), with: 1007)
        // No payload: echo an empty close; the status is "no status received".
        machine = WebSocketConnectionStateMachine()
        let actions = machine.receive(frame(.close, []))
        XCTAssertEqual(sentFrame(actions.first), DecodedFrame(opcode: .close, payload: []))
        XCTAssertEqual(machine.receivedClose?.code, .noStatusReceived)
    }

    func testNothingIsProcessedAfterTheClose() {
        var machine = WebSocketConnectionStateMachine()
        let actions = machine.receive(frame(.close, closePayload(1000)) + frame(.text, "late") + frame(.ping, "late"))
        XCTAssertEqual(actions.count, 2)
        XCTAssertEqual(machine.receive(frame(.text, "later")), [])
        XCTAssertNil(machine.close())
    }

    func testServerInitiatedClose() throws {
        var machine = WebSocketConnectionStateMachine()
        let bytes = try XCTUnwrap(machine.close(code: .goingAway, reason: "restart"))
        var collector = FrameCollector(expectsMaskedFrames: false)
        try collector.feed(bytes)
        XCTAssertEqual(collector.frames.first?.closeCode, 1001)
        XCTAssertEqual(machine.state, .closing)
        XCTAssertFalse(machine.canSend)
        XCTAssertNil(machine.close(), "only one close frame")
        // While closing: data is read but not delivered, pings are not answered.
        XCTAssertEqual(machine.receive(frame(.text, "in flight")), [])
        XCTAssertEqual(machine.receive(frame(.ping, "x")), [])
        // The peer's close completes the handshake without a second close frame.
        XCTAssertEqual(machine.receive(frame(.close, closePayload(1001))), [.closeConnection])
        XCTAssertEqual(machine.state, .closed)
        XCTAssertEqual(machine.sentClose, WebSocketCloseStatus(code: .goingAway, reason: "restart"))
    }

    func testProtocolErrorWhileClosingClosesWithoutASecondCloseFrame() {
        var machine = WebSocketConnectionStateMachine()
        XCTAssertNotNil(machine.close())
        XCTAssertEqual(machine.receive([0x83, 0x80, 1, 2, 3, 4]), [.closeConnection])
    }
}
