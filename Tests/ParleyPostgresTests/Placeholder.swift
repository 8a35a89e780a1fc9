import XCTest

final class ParleyPostgresTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
