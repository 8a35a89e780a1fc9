import ParleyJSON
@testable import ParleyRealtime
import XCTest

final class SmallTypesTests: XCTestCase {
    func testMessageIDsAreVersion7AndSortByTime() {
        let early = MessageID.make(milliseconds: 1_700_000_000_000)
        let late = MessageID.make(milliseconds: 1_700_000_000_001)
        XCTAssertTrue(MessageID.isValid(early))
        XCTAssertEqual(Array(early)[14], "7")
        XCTAssertTrue("89ab".contains(Array(early)[19]))
        XCTAssertLessThan(early, late)
        XCTAssertTrue(early.hasPrefix("018bcfe5-6800-7"))
        XCTAssertNotEqual(MessageID.make(milliseconds: 5), MessageID.make(milliseconds: 5))
        XCTAssertFalse(MessageID.isValid("018bcfe5-6800-7000-8000-00000000000"))
        XCTAssertFalse(MessageID.isValid("018bcfe5x6800-7000-8000-000000000000"))
        XCTAssertFalse(MessageID.isValid("g18bcfe5-6800-7000-8000-000000000000"))
    }

    func testMessageIDsMadeInTheSameMillisecondSortInTheOrderMade() {
        let ids = (0..<70_000).map { _ in MessageID.make(milliseconds: 1_800_000_000_000) }
        for (earlier, later) in zip(ids, ids.dropFirst()) where !(earlier < later) {
            XCTFail("\(earlier) does not sort before the next id \(later)")
            return
        }
        XCTAssertTrue(ids.first!.hasPrefix("01a3185c-5000-7"))
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertTrue(ids.allSatisfy { Array($0)[14] == "7" && "89ab".contains(Array($0)[19]) })
    }

    func testSQLArrayLiteralsAndParsing() {
        XCTAssertEqual(SQLArray.literal(["a", "b\"c", "d\\e", "", "é"]), #"{"a","b\"c","d\\e","","é"}"#)
        XCTAssertEqual(SQLArray.literal([1, 2, 3] as [Int]), "{1,2,3}")
        XCTAssertEqual(SQLArray.literal([true, false]), "{t,f}")
        XCTAssertEqual(SQLArray.parse("{}"), [])
        XCTAssertEqual(SQLArray.parse("{abc,def}"), ["abc", "def"])
        XCTAssertEqual(SQLArray.parse(#"{"a b","c\"d",NULL,"NULL"}"#), ["a b", "c\"d", "NULL"])
        XCTAssertNil(SQLArray.parse("abc"))
        XCTAssertNil(SQLArray.parse(#"{"unterminated}"#))
    }

    func testClusterMessagesRoundTrip() {
        let messages: [ClusterMessage] = [
            .event(DeviceKey(userId: "u1", deviceId: "d-1"), seq: 42),
            .replace(DeviceKey(userId: "u1", deviceId: "d-1"), connectionID: 7),
            .typing(to: "u2", from: "u1", active: false),
            .presence(userId: "u3", online: true, at: 1_700_000_000_000, node: "abc123"),
            .joined(node: "abc123"),
        ]
        XCTAssertEqual(ClusterMessage.parse(messages.map(\.line).joined(separator: "\n")), messages)
        XCTAssertEqual(ClusterMessage.parse("e u d notanumber\nx y\n\ne u d 3"), [.event(DeviceKey(userId: "u", deviceId: "d"), seq: 3)])
        XCTAssertEqual(ClusterMessage.parse("t a b 2\np u 3 1 n\nr u d\nn\nn  \nn a b"), [])
    }

    func testServerFrames() throws {
        func payload(_ frame: [UInt8]) throws -> JSONValue {
            XCTAssertEqual(frame[0], 0x81)
            let length = Int(frame[1] & 0x7F)
            let start = length == 126 ? 4 : 2
            return try JSONParser().parse(Array(frame[start...]))
        }
        let message = MessageRecord(id: "m1", from: "a", to: ["b", "c"], text: "hi \"there\"\n", headersJSON: #"{"k": "v"}"#, sentAt: 1_700_000_000_123)
        let event = try payload(ServerFrame.event(QueuedEvent(seq: 9, body: .message(message))))
        XCTAssertEqual(event, [
            "type": "message", "seq": 9, "messageId": "m1", "from": "a", "to": ["b", "c"], "text": "hi \"there\"\n",
            "headers": ["k": "v"], "sentAt": "2023-11-14T22:13:20.123Z",
        ])
        XCTAssertEqual(try payload(MessageFrameTemplate(message).frame(seq: 10))["seq"], 10)
        XCTAssertEqual(try payload(ServerFrame.event(QueuedEvent(seq: 3, body: .receipt(kind: "read", messageId: "m1", userId: "b", at: 0)))),
                       ["type": "receipt", "seq": 3, "kind": "read", "messageId": "m1", "userId": "b", "at": "1970-01-01T00:00:00.000Z"])
        XCTAssertEqual(try payload(ServerFrame.event(QueuedEvent(seq: 4, body: .custom(["type": "call.incoming", "callId": "c", "seq": 99])))),
                       ["type": "call.incoming", "seq": 4, "callId": "c"])
        XCTAssertEqual(try payload(ServerFrame.welcome(userId: "u", deviceId: "d", lastSeq: 5, gap: true, reset: false)),
                       ["type": "welcome", "userId": "u", "deviceId": "d", "lastSeq": 5, "gap": true])
        XCTAssertEqual(try payload(ServerFrame.error(re: .string("x"), code: .rateLimited, message: "slow")),
                       ["type": "error", "re": "x", "code": "rate_limited", "error": "slow"])
        XCTAssertEqual(try payload(ServerFrame.ok(re: nil, [("a", 1)])), ["type": "ok", "re": nil, "a": 1])
        XCTAssertEqual(try payload(ServerFrame.presence(userId: "u", online: false, lastSeenAt: nil)),
                       ["type": "presence", "userId": "u", "online": false, "lastSeenAt": nil])
        XCTAssertEqual(try payload(ServerFrame.typing(from: "u", active: true)), ["type": "typing", "from": "u", "active": true])
        XCTAssertEqual(try payload(ServerFrame.unqueued(["type": "call.candidates", "callId": "c"])), ["type": "call.candidates", "callId": "c"])
    }
}

final class DeviceLabelTests: XCTestCase {
    func testALabelIsStablePerDeviceDifferentPerUserAndHidesTheId() {
        let key = Array("k".utf8)
        let phone = DeviceLabel.make(key: key, device: DeviceKey(userId: "bob", deviceId: "inst-1"))
        XCTAssertEqual(phone, DeviceLabel.make(key: key, device: DeviceKey(userId: "bob", deviceId: "inst-1")))
        XCTAssertNotEqual(phone, DeviceLabel.make(key: key, device: DeviceKey(userId: "carol", deviceId: "inst-1")))
        XCTAssertNotEqual(phone, DeviceLabel.make(key: Array("other".utf8), device: DeviceKey(userId: "bob", deviceId: "inst-1")))
        XCTAssertNotEqual(DeviceLabel.make(key: key, device: DeviceKey(userId: "ab", deviceId: "c")),
                          DeviceLabel.make(key: key, device: DeviceKey(userId: "a", deviceId: "bc")), "the user and device are kept apart")
        XCTAssertEqual(phone.utf8.count, 24)
        XCTAssertTrue(phone.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
        XCTAssertEqual(phone, "7f28a64a5d4e2a11c5db936c", "HMAC-SHA256(\"k\", \"bob\\0inst-1\"), as Python's hmac computes it")
    }
}
