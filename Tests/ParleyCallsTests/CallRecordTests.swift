import ParleyCalls
import ParleyJSON
import XCTest

final class CallRecordTests: XCTestCase {
    func testDetailsTimesAreISO8601UTCWithMilliseconds() {
        var details = CallDetails(startedAt: 0, video: false)
        details.progressedAt = 951_782_400_007        // 2000-02-29T00:00:00.007Z (leap day)
        details.rungAt = 1_796_083_199_999            // 2026-11-30T23:59:59.999Z
        details.answeredAt = -1                       // 1969-12-31T23:59:59.999Z
        details.endedAt = 253_402_300_799_000         // 9999-12-31T23:59:59.000Z
        details.endCause = .hungUp
        let record = CallRecord(callId: "c", caller: CallDevice(userId: "a", deviceId: "a1"), calleeId: "b", answerDevice: nil,
                                headers: JSONObject(), state: .ended, details: details)
        let json = record.json { "label-of-\($0.deviceId)" }
        XCTAssertEqual(json["startedAt"], "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(json["progressedAt"], "2000-02-29T00:00:00.007Z")
        XCTAssertEqual(json["rungAt"], "2026-11-30T23:59:59.999Z")
        XCTAssertEqual(json["answeredAt"], "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(json["endedAt"], "9999-12-31T23:59:59.000Z")
        XCTAssertEqual(json["establishedAt"], .null)
        XCTAssertEqual(json["answeredDeviceId"], .null)
        var answered = record
        answered.answerDevice = "b-phone"
        XCTAssertEqual(answered.json { "label-of-\($0.userId)/\($0.deviceId)" }["answeredDeviceId"], "label-of-b/b-phone", "the callee's device, by its label")
    }
}
