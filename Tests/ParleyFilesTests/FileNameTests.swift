import ParleyFiles
import XCTest

/// Parse Server's file name rules, the unique prefix and the byte ranges a download answers.
final class FileNameTests: XCTestCase {
    func testNamesFollowParseServersPattern() throws {
        let name = try FileName.make(clientName: "photo 1@x~y_z-.jpg", contentType: "image/jpeg")
        let parts = name.value.split(separator: "_", maxSplits: 1)
        XCTAssertEqual(parts[0].count, 32, "a 32-hex-digit prefix")
        XCTAssertTrue(parts[0].allSatisfy { $0.isHexDigit })
        XCTAssertEqual(String(parts[1]), "photo 1@x~y_z-.jpg")
        XCTAssertNotEqual(try FileName.make(clientName: "a.txt", contentType: nil), try FileName.make(clientName: "a.txt", contentType: nil))
        for bad in ["", ".hidden", "-dash", "a/b", "../etc", "a\u{0}b", "é.png", "a?b", String(repeating: "a", count: 129)] {
            XCTAssertThrowsError(try FileName.make(clientName: bad, contentType: nil), bad) { error in
                guard case FileError.invalidName = error else { return XCTFail("\(error)") }
            }
        }
        XCTAssertThrowsError(try FileName.make(clientName: String(repeating: "a", count: 129), contentType: nil)) {
            XCTAssertEqual($0 as? FileError, .invalidName("Filename too long."))
        }
        XCTAssertNoThrow(try FileName.make(clientName: String(repeating: "a", count: 128), contentType: nil))
    }

    func testAnExtensionComesFromTheContentTypeWhenTheNameHasNone() throws {
        XCTAssertTrue(try FileName.make(clientName: "avatar", contentType: "image/png; charset=binary").value.hasSuffix("_avatar.png"))
        XCTAssertTrue(try FileName.make(clientName: "avatar", contentType: "x-unknown/thing").value.hasSuffix("_avatar"))
        XCTAssertEqual(try FileName.make(clientName: "a.JPG", contentType: nil).contentType, "image/jpeg")
        XCTAssertEqual(try FileName.make(clientName: "noext", contentType: nil).contentType, "application/octet-stream")
    }

    func testStoredNamesAreOnePathSegment() {
        XCTAssertNoThrow(try FileName(stored: "0123abcd_a.txt"))
        for bad in ["", "../x", "a/b", ".upload-x", "%2e%2e"] {
            XCTAssertThrowsError(try FileName(stored: bad), bad)
        }
    }

    func testRanges() {
        XCTAssertEqual(ByteRange.parse("bytes=0-9", size: 100), .part(0..<10))
        XCTAssertEqual(ByteRange.parse("bytes=90-", size: 100), .part(90..<100))
        XCTAssertEqual(ByteRange.parse("bytes=-10", size: 100), .part(90..<100))
        XCTAssertEqual(ByteRange.parse("bytes=-1000", size: 100), .part(0..<100))
        XCTAssertEqual(ByteRange.parse("bytes=50-1000", size: 100), .part(50..<100))
        XCTAssertEqual(ByteRange.parse("bytes=100-", size: 100), .unsatisfiable)
        XCTAssertEqual(ByteRange.parse("bytes=-0", size: 100), .unsatisfiable)
        XCTAssertEqual(ByteRange.parse("bytes=0-1,5-6", size: 100), .whole, "several ranges: the whole body")
        XCTAssertEqual(ByteRange.parse("bytes=9-3", size: 100), .whole, "an invalid range is ignored")
        XCTAssertEqual(ByteRange.parse("items=0-3", size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("bytes=+1-3", size: 100), .whole)
        XCTAssertEqual(ByteRange.parse("bytes=99999999999999999999-", size: 100), .whole)
    }
}
