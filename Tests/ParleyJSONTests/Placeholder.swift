import XCTest

final class ParleyJSONTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
