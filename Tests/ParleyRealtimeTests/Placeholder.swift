import XCTest

final class ParleyRealtimeTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
