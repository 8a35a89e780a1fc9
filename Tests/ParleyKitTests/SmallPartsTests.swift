import Foundation
import ParleyJSON
@testable import ParleyKit
import XCTest

/// File storage, UUIDs, time, URLs and push payloads.
final class SmallPartsTests: XCTestCase {
    var directory: String!

    override func setUp() {
        directory = NSTemporaryDirectory() + "parleykit-storage-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func entry(_ id: String, _ text: String = "x") -> OutboxEntry {
        OutboxEntry(clientMessageId: id, message: OutgoingMessage(to: ["u1", "u2"], text: text, headers: ["k": "v"]))
    }

    func testFileStorageKeepsTheOutboxAndCursorAcrossInstances() async throws {
        let storage = FileStorage(directory: directory)
        let empty = try await storage.load()
        XCTAssertEqual(empty, ParleyStoredState())
        try await storage.appendOutbox([entry("a", "line\nbreak \"quoted\" ✓"), entry("b")])
        try await storage.appendOutbox([entry("c")])
        try await storage.removeOutbox(["b"])
        try await storage.saveCursor(CursorRecord(seq: 42, recentKeys: ["m:1", "r:read:2:u"]))
        let reloaded = try await FileStorage(directory: directory).load()
        XCTAssertEqual(reloaded.outbox, [entry("a", "line\nbreak \"quoted\" ✓"), entry("c")])
        XCTAssertEqual(reloaded.cursor, CursorRecord(seq: 42, recentKeys: ["m:1", "r:read:2:u"]))
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/outbox.log")[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/cursor.json.tmp"), "the temporary file was renamed")
    }

    func testATornLastRecordIsIgnoredAndTheLogIsCompacted() async throws {
        let storage = FileStorage(directory: directory)
        _ = try await storage.load()
        try await storage.appendOutbox([entry("a")])
        // A crash in the middle of the next write leaves half a record without its newline.
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: directory + "/outbox.log"))
        handle.seekToEndOfFile()
        handle.write(Data("+{\"clientMessageId\":\"b\",\"to\":[\"u".utf8))
        handle.closeFile()
        let reloaded = try await FileStorage(directory: directory).load()
        XCTAssertEqual(reloaded.outbox.map(\.clientMessageId), ["a"])

        // Many sends and removals: the log is rewritten with only the live entries.
        let busy = FileStorage(directory: directory + "-busy")
        _ = try await busy.load()
        for index in 0..<400 {
            try await busy.appendOutbox([entry("e\(index)")])
            if index > 0 { try await busy.removeOutbox(["e\(index - 1)"]) }
        }
        let log = try String(contentsOfFile: directory + "-busy/outbox.log", encoding: .utf8)
        XCTAssertLessThan(log.split(separator: "\n").count, 600, "compacted")
        let final = try await FileStorage(directory: directory + "-busy").load()
        XCTAssertEqual(final.outbox.map(\.clientMessageId), ["e399"])
        try? FileManager.default.removeItem(atPath: directory + "-busy")
    }

    func testStorageErrorsAreTyped() async {
        let storage = FileStorage(directory: "/proc/parleykit-cannot-exist/x")
        do {
            _ = try await storage.load()
            XCTFail("load must fail")
        } catch {
            guard case .storage(let operation, let errno) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(operation.hasPrefix("mkdir"))
            XCTAssertNotEqual(errno, 0)
        }
    }

    func testUUIDsAreVersion4AndRoundTrip() {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let uuid = ParleyUUID.random()
            let text = uuid.uuidString
            XCTAssertEqual(text.count, 36)
            XCTAssertEqual(Array(text)[14], "4")
            XCTAssertTrue("89ab".contains(Array(text)[19]))
            XCTAssertEqual(ParleyUUID(text), uuid)
            XCTAssertEqual(ParleyUUID(text.uppercased()), uuid)
            XCTAssertEqual(UUID(uuidString: text).map { ParleyUUID(bytes: $0.uuid) }, uuid, "the bytes are uuid_t's")
            seen.insert(text)
        }
        XCTAssertEqual(seen.count, 1000)
        XCTAssertNil(ParleyUUID("6f9619ff-8b86-d011-b42d-00c04fc964f"))
        XCTAssertNil(ParleyUUID("6f9619ff_8b86-d011-b42d-00c04fc964ff"))
        XCTAssertNil(ParleyUUID("6f9619ff-8b86-d011-b42d-00c04fc964fg"))
    }

    func testWallClockParsesTheServersTimestamps() {
        XCTAssertEqual(WallClock.parse("1970-01-01T00:00:00.000Z"), 0)
        XCTAssertEqual(WallClock.parse("2026-11-30T07:26:04.574Z"), 1_796_023_564_574)
        XCTAssertEqual(WallClock.parse("2000-02-29T23:59:59Z"), 951_868_799_000)
        XCTAssertEqual(WallClock.parse("2026-11-30T07:26:04.5Z"), 1_796_023_564_500)
        XCTAssertNil(WallClock.parse("2026-13-30T07:26:04.574Z"))
        XCTAssertNil(WallClock.parse("2026-11-30 07:26:04Z"))
        XCTAssertNil(WallClock.parse("yesterday"))
        let now = WallClock.nowMilliseconds()
        XCTAssertEqual(Double(now), Date().timeIntervalSince1970 * 1000, accuracy: 5000)
    }

    func testServerURLs() {
        let plain = ParleyServerURL("http://127.0.0.1:8080/")!
        XCTAssertEqual(plain.socketURL, "ws://127.0.0.1:8080/v1/socket")
        XCTAssertEqual(plain.authority, "127.0.0.1:8080")
        let secure = ParleyServerURL("https://chat.example.com")!
        XCTAssertEqual(secure.socketURL, "wss://chat.example.com/v1/socket")
        XCTAssertEqual(secure.port, 443)
        XCTAssertEqual(ParleyServerURL("http://[::1]:9000")?.host, "::1")
        XCTAssertEqual(ParleyServerURL("http://[::1]:9000")?.authority, "[::1]:9000")
        for bad in ["ftp://x", "http://", "http://a:0", "http://a:70000", "http://a/b", "http://u@a"] {
            XCTAssertNil(ParleyServerURL(bad), bad)
        }
        XCTAssertEqual(ParleyREST.percentEncoded("a b&c/ü"), "a%20b%26c%2F%C3%BC")
    }

    func testVoIPPushPayloadsFromAPNsAndFCM() throws {
        let apns = """
        {"aps":{},"type":"call","callId":"6F9619FF-8B86-D011-B42D-00C04FC964FF","from":"pQ7rS9tU1v","callerName":"Alice Liddell",
         "video":true,"headers":{"name":"Alice"},"expiresAt":"2026-11-30T08:15:04.120Z"}
        """
        let payload = try XCTUnwrap(VoIPPushPayload(jsonText: apns))
        XCTAssertEqual(payload.callId, "6F9619FF-8B86-D011-B42D-00C04FC964FF")
        XCTAssertEqual(payload.uuid, ParleyUUID("6f9619ff-8b86-d011-b42d-00c04fc964ff"))
        XCTAssertEqual(payload.from, "pQ7rS9tU1v")
        XCTAssertEqual(payload.callerName, "Alice Liddell")
        XCTAssertTrue(payload.video)
        XCTAssertEqual(payload.headers, ["name": "Alice"])
        XCTAssertTrue(payload.isExpired(nowMilliseconds: WallClock.parse("2026-11-30T08:15:04.120Z")!))
        XCTAssertFalse(payload.isExpired(nowMilliseconds: WallClock.parse("2026-11-30T08:15:04.119Z")!))

        let fcm: JSONValue = ["type": "call", "callId": "6f9619ff-8b86-d011-b42d-00c04fc964ff", "from": "u", "video": "true",
                              "headers": "{\"name\":\"Alice\"}", "expiresAt": "2026-11-30T08:15:04.120Z"]
        let android = try XCTUnwrap(VoIPPushPayload(fcm))
        XCTAssertTrue(android.video)
        XCTAssertEqual(android.headers, ["name": "Alice"])
        let omitted = try XCTUnwrap(VoIPPushPayload(["type": "call", "callId": "6f9619ff-8b86-d011-b42d-00c04fc964ff", "from": "u",
                                                     "headers": [:], "headersOmitted": true]))
        XCTAssertTrue(omitted.headersOmitted)
        XCTAssertFalse(omitted.video)

        XCTAssertNil(VoIPPushPayload(jsonText: "{\"type\":\"message\",\"messageId\":\"x\"}"), "a message push is not a call")
        XCTAssertNil(VoIPPushPayload(jsonText: "{\"type\":\"call\",\"callId\":\"not-a-uuid\",\"from\":\"u\"}"))
        XCTAssertNil(VoIPPushPayload(jsonText: "{\"type\":\"call\",\"callId\":\"6f9619ff-8b86-d011-b42d-00c04fc964ff\"}"))
        XCTAssertNil(VoIPPushPayload(jsonText: "{not json"))
        XCTAssertNil(VoIPPushPayload(jsonText: "[" + String(repeating: "1,", count: 40_000) + "1]"), "oversized")
    }
}
