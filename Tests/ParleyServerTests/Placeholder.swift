import XCTest

final class ParleyServerTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
