import XCTest

final class ParleyAccountsTestsPlaceholder: XCTestCase {
    func testBuilds() {}
}
