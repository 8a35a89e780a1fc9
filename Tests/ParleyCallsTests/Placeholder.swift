import XCTest

final class ParleyCallsTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
