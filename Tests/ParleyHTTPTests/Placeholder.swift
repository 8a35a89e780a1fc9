import XCTest

final class ParleyHTTPTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
