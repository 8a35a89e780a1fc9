import ParleyNet
import XCTest

final class IPNetworkTests: XCTestCase {
    func testCIDRsMatchPeersInEitherSpelling() throws {
        let private10 = try XCTUnwrap(IPNetwork("10.0.0.0/8"))
        XCTAssertTrue(private10.contains("10.1.2.3"))
        XCTAssertTrue(private10.contains("10.255.0.1:54321"), "a peer's host:port")
        XCTAssertTrue(private10.contains("[::ffff:10.9.8.7]:80"), "an IPv4-mapped IPv6 peer")
        XCTAssertFalse(private10.contains("11.0.0.1"))
        XCTAssertFalse(private10.contains("[::1]:80"))
        let host = try XCTUnwrap(IPNetwork("127.0.0.1"))
        XCTAssertTrue(host.contains("127.0.0.1:9"))
        XCTAssertFalse(host.contains("127.0.0.2:9"))
        let odd = try XCTUnwrap(IPNetwork("192.168.10.77/22"))
        XCTAssertEqual(odd.description, "192.168.8.0/22")
        XCTAssertTrue(odd.contains("192.168.11.255"))
        XCTAssertFalse(odd.contains("192.168.12.0"))
        let v6 = try XCTUnwrap(IPNetwork("fd00::/8"))
        XCTAssertTrue(v6.contains("[fd12:3456::1]:443"))
        XCTAssertFalse(v6.contains("fe80::1"))
        XCTAssertTrue(try XCTUnwrap(IPNetwork("0.0.0.0/0")).contains("203.0.113.9"))
        for bad in ["", "10.0.0.0/", "10.0.0.0/33", "::/129", "example.com", "10.0.0.0/-1", "1.2.3.4/8x"] {
            XCTAssertNil(IPNetwork(bad), bad)
        }
        XCTAssertFalse(private10.contains("unix"))
        XCTAssertFalse(private10.contains(""))
    }
}
