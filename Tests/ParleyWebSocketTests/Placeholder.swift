import XCTest

final class ParleyWebSocketTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
