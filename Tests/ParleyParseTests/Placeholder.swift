import XCTest

final class ParleyParseTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
