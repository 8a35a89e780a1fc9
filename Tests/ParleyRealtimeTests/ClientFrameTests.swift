import ParleyJSON
@testable import ParleyRealtime
import XCTest

final class ClientFrameTests: XCTestCase {
    let limits = ClientFrameLimits(maxRecipients: 3, maxTextBytes: 10, maxHeaderBytes: 20, maxClientMessageIDBytes: 8, maxListLength: 4)

    func parse(_ text: String) throws -> ClientFrame {
        try ClientFrame.parse(text, limits: limits)
    }

    func expectError(_ text: String, _ code: RealtimeErrorCode, id: RequestID? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(text), file: file, line: line) { error in
            guard let error = error as? ClientFrameError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
            XCTAssertEqual(error.id, id, file: file, line: line)
        }
    }

    func testHello() throws {
        XCTAssertEqual(try parse(#"{"type":"hello","sessionToken":"r:abc","deviceId":"dev-1","resumeAfter":7}"#),
                       .hello(HelloFrame(sessionToken: "r:abc", deviceId: "dev-1", resumeAfter: 7)))
        XCTAssertEqual(try parse(#"{"type":"hello","sessionToken":"r:abc","deviceId":"D"}"#),
                       .hello(HelloFrame(sessionToken: "r:abc", deviceId: "D", resumeAfter: 0)))
        expectError(#"{"type":"hello","deviceId":"d"}"#, .badRequest)
        expectError(#"{"type":"hello","sessionToken":"t","deviceId":"has space"}"#, .invalidDevice)
        expectError(#"{"type":"hello","sessionToken":"t","deviceId":""}"#, .badRequest)
        expectError(#"{"type":"hello","sessionToken":"t","deviceId":"d","resumeAfter":-1}"#, .badRequest)
        expectError(#"{"type":"hello","sessionToken":"t","deviceId":"d","resumeAfter":"5"}"#, .badRequest)
        XCTAssertThrowsError(try parse(#"{"type":"hello","sessionToken":"t","deviceId":"\#(String(repeating: "x", count: 129))"}"#))
    }

    func testMessageSend() throws {
        let frame = try parse(#"{"type":"message.send","id":"r1","clientMessageId":"c1","to":["a","b","a"],"text":"hi","headers":{"k":"v"}}"#)
        XCTAssertEqual(frame, .send(id: .string("r1"), SendMessageRequest(clientMessageId: "c1", to: ["a", "b"], text: "hi", headersJSON: #"{"k":"v"}"#)))
        let noHeaders = try parse(#"{"type":"message.send","id":5,"clientMessageId":"c1","to":["a"],"text":""}"#)
        XCTAssertEqual(noHeaders, .send(id: .int(5), SendMessageRequest(clientMessageId: "c1", to: ["a"], text: "", headersJSON: "{}")))

        expectError(#"{"type":"message.send","clientMessageId":"c1","to":["a"],"text":"x"}"#, .badRequest)
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":["a","b","c","d"],"text":"x"}"#, .tooManyRecipients, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":[],"text":"x"}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":"a","text":"x"}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":[1],"text":"x"}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":["a"],"text":"12345678901"}"#, .textTooLong, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":["a"],"text":"x","headers":{"kkkkkkkk":"vvvvvvvvvvvv"}}"#, .headersTooLarge, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c1","to":["a"],"text":"x","headers":[]}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"123456789","to":["a"],"text":"x"}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c","to":["a"],"text":"a\u0000b"}"#, .badRequest, id: .int(1))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c","to":["a\u0000"],"text":"x"}"#, .badRequest, id: .int(1))
        // Ten bytes of text, counted in UTF-8.
        XCTAssertNoThrow(try parse(#"{"type":"message.send","id":1,"clientMessageId":"c","to":["a"],"text":"ééééé"}"#))
        expectError(#"{"type":"message.send","id":1,"clientMessageId":"c","to":["a"],"text":"éééééé"}"#, .textTooLong, id: .int(1))
    }

    func testOtherFrames() throws {
        XCTAssertEqual(try parse(#"{"type":"ack","upTo":12}"#), .ack(id: nil, upTo: 12))
        XCTAssertEqual(try parse(#"{"type":"ack","upTo":12,"id":"x"}"#), .ack(id: .string("x"), upTo: 12))
        expectError(#"{"type":"ack"}"#, .badRequest)
        expectError(#"{"type":"ack","upTo":-3}"#, .badRequest)
        XCTAssertEqual(try parse(#"{"type":"message.read","id":1,"messageId":"0192F000-0000-7000-8000-000000000001"}"#),
                       .read(id: .int(1), messageIds: ["0192f000-0000-7000-8000-000000000001"]))
        expectError(#"{"type":"message.read","id":1,"messageIds":["nope"]}"#, .badRequest, id: .int(1))
        XCTAssertEqual(try parse(#"{"type":"presence.subscribe","id":2,"users":["a","b"]}"#), .presenceSubscribe(id: .int(2), users: ["a", "b"]))
        expectError(#"{"type":"presence.subscribe","id":2,"users":["a","b","c","d","e"]}"#, .badRequest, id: .int(2))
        XCTAssertEqual(try parse(#"{"type":"typing","to":"a"}"#), .typing(id: nil, to: "a", active: true))
        XCTAssertEqual(try parse(#"{"type":"typing","to":"a","active":false}"#), .typing(id: nil, to: "a", active: false))
        guard case .other(let type, let id, let object) = try parse(#"{"type":"call.invite","id":9,"callId":"c"}"#) else { return XCTFail() }
        XCTAssertEqual(type, "call.invite")
        XCTAssertEqual(id, .int(9))
        XCTAssertEqual(object["callId"], "c")
    }

    func testMalformedFrames() {
        expectError("not json", .badJSON)
        expectError("[1,2]", .badJSON)
        expectError(#"{"id":1}"#, .badRequest, id: .int(1))
        expectError(#"{"type":3}"#, .badRequest)
        expectError(#"{"type":"ack","id":{"x":1},"upTo":1}"#, .badRequest)
        expectError(#"{"type":"ack","id":1.5,"upTo":1}"#, .badRequest)
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        expectError(#"{"type":"x","v":\#(deep)}"#, .badJSON)
    }

    func testDeviceIDCharset() {
        XCTAssertTrue(ClientFrame.isValidDeviceID("3f2a9c1e-0d4b-4f7e-9a51-2b6c8d0e1f23"))
        XCTAssertFalse(ClientFrame.isValidDeviceID("tab\there"))
        XCTAssertFalse(ClientFrame.isValidDeviceID("ünïcode"))
        XCTAssertFalse(ClientFrame.isValidDeviceID(""))
    }
}
