import XCTest

final class ParleyPushTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
