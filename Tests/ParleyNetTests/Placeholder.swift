import XCTest

final class ParleyNetTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
