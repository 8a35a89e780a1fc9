import Foundation
import ParleyFiles
import ParleyNet
import ParleyParse
import ParleyTestSupport
import XCTest

/// Parse's Files API over real sockets, stored in a local directory: upload, download with
/// ranges and validators, delete, limits and who may upload.
final class ParseFilesTests: XCTestCase {
    private var directory = ""

    override func setUp() {
        directory = NSTemporaryDirectory() + "parley-files-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func harness(maxUploadBytes: Int = 20 * 1024 * 1024, policy: ParseFiles.UploadPolicy = .init()) async throws -> ParseHarness {
        let directory = self.directory
        return try await ParseHarness(files: { pool in
            ParseFiles(storage: try DiskFileStorage(directory: directory, pool: pool), maxUploadBytes: maxUploadBytes, upload: policy)
        })
    }

    private func upload(_ h: ParseHarness, _ name: String, _ bytes: [UInt8], contentType: String? = "image/png", token: String?, master: Bool = false) throws -> ParseHarness.Reply {
        var headers: [(String, String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        return try h.call("POST", "/parse/files/\(name)", token: token, master: master, headers: headers, rawBody: String(decoding: bytes, as: UTF8.self))
    }

    /// GET of a file URL's path with extra headers, and no Parse headers (file URLs are public).
    private func download(_ h: ParseHarness, _ url: String, headers: [(String, String)] = [], method: String = "GET") throws -> TestHTTPClient.Response {
        let path = String(url[url.range(of: "/parse/files/")!.lowerBound...])
        return try TestHTTPClient(port: h.server.port).request(method, path, headers: headers)
    }

    func testUploadDownloadRangesValidatorsAndDelete() async throws {
        let h = try await harness()
        let alice = try h.signUp("alice")
        let bytes = Array((0..<100_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let created = try upload(h, "photo.png", bytes, token: alice.token)
        XCTAssertEqual(created.status, 201, "\(created.json ?? "")")
        let name = try XCTUnwrap(created["name"] as? String)
        let url = try XCTUnwrap(created["url"] as? String)
        XCTAssertTrue(name.hasSuffix("_photo.png"))
        XCTAssertEqual(name.count, 32 + 1 + "photo.png".count)
        XCTAssertEqual(created.header("Location"), url)
        XCTAssertTrue(url.hasSuffix("/parse/files/\(h.appID)/\(name)"), url)
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/" + name), "stored in the directory")

        let whole = try download(h, url)
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body, bytes)
        XCTAssertEqual(whole.header("Content-Type"), "image/png")
        XCTAssertEqual(whole.header("Accept-Ranges"), "bytes")
        XCTAssertNotNil(whole.header("Last-Modified"))
        let etag = try XCTUnwrap(whole.header("ETag"))

        let part = try download(h, url, headers: [("Range", "bytes=10-19")])
        XCTAssertEqual(part.status, 206)
        XCTAssertEqual(part.body, Array(bytes[10...19]))
        XCTAssertEqual(part.header("Content-Range"), "bytes 10-19/100000")
        let tail = try download(h, url, headers: [("Range", "bytes=-5")])
        XCTAssertEqual(tail.body, Array(bytes.suffix(5)))
        let beyond = try download(h, url, headers: [("Range", "bytes=100000-")])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.header("Content-Range"), "bytes */100000")
        let stale = try download(h, url, headers: [("Range", "bytes=0-0"), ("If-Range", "\"other\"")])
        XCTAssertEqual(stale.status, 200, "an If-Range that does not match sends the whole file")

        let cached = try download(h, url, headers: [("If-None-Match", etag)])
        XCTAssertEqual(cached.status, 304)
        XCTAssertTrue(cached.body.isEmpty)
        XCTAssertEqual(try download(h, url, headers: [("If-None-Match", "\"x\"")]).status, 200)
        let head = try download(h, url, method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "100000")
        XCTAssertTrue(head.body.isEmpty)

        XCTAssertEqual(try h.call("DELETE", "/parse/files/\(name)", token: alice.token).status, 403, "delete needs the master key")
        XCTAssertEqual(try download(h, url).status, 200)
        XCTAssertEqual(try h.call("DELETE", "/parse/files/\(name)", master: true).status, 200)
        let gone = try download(h, url)
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.text, "File not found.")
        XCTAssertEqual(try h.call("DELETE", "/parse/files/\(name)", master: true).code, 153, "a second delete: Parse's FILE_DELETE_ERROR")
        await h.shutdown()
    }

    func testNamesTypesAndWhoMayUpload() async throws {
        let h = try await harness()
        let alice = try h.signUp("alice")
        let typed = try upload(h, "avatar", Array("x".utf8), contentType: "image/jpeg", token: alice.token)
        XCTAssertTrue((typed["name"] as? String ?? "").hasSuffix("_avatar.jpeg"), "the content type's extension is added")
        let served = try download(h, typed["url"] as? String ?? "")
        XCTAssertEqual(served.header("Content-Type"), "image/jpeg")
        XCTAssertEqual(served.header("X-Content-Type-Options"), "nosniff")

        for bad in ["..%2Fetc", ".hidden", "a%20%3Cb%3E", String(repeating: "n", count: 129)] {
            let reply = try upload(h, bad, Array("x".utf8), token: alice.token)
            XCTAssertEqual(reply.code, 122, "\(bad): \(reply.json ?? "")")
        }
        XCTAssertEqual(try upload(h, String(repeating: "n", count: 129), Array("x".utf8), token: alice.token)["error"] as? String, "Filename too long.")
        XCTAssertEqual(try h.call("POST", "/parse/files", token: alice.token, rawBody: "x")["error"] as? String, "Filename not provided.")
        XCTAssertEqual(try upload(h, "empty.txt", [], token: alice.token)["error"] as? String, "Invalid file upload.")

        let anonymous = try upload(h, "a.txt", Array("x".utf8), token: nil)
        XCTAssertEqual(anonymous.code, 130)
        XCTAssertEqual(anonymous["error"] as? String, "File upload by public is disabled.")
        XCTAssertEqual(try upload(h, "a.txt", Array("x".utf8), token: nil, master: true).status, 201, "the master key may always upload")
        XCTAssertEqual(try upload(h, "a.txt", Array("x".utf8), token: "r:forged").code, 209)

        let wrongApp = try TestHTTPClient(port: h.server.port).request("GET", "/parse/files/other-app/\(typed["name"] as? String ?? "")")
        XCTAssertEqual(wrongApp.status, 403)
        for path in ["/parse/files/\(h.appID)/..%2F..%2Fetc%2Fpasswd", "/parse/files/\(h.appID)/.upload-x", "/parse/files/\(h.appID)/nothing.txt"] {
            XCTAssertEqual(try TestHTTPClient(port: h.server.port).request("GET", path).status, 404, path)
        }
        await h.shutdown()

        let open = try await harness(policy: .init(enableForPublic: true, enableForAuthenticatedUser: false))
        let bob = try open.signUp("bob")
        XCTAssertEqual(try upload(open, "a.txt", Array("x".utf8), token: nil).status, 201)
        XCTAssertEqual(try upload(open, "a.txt", Array("x".utf8), token: bob.token)["error"] as? String, "File upload by authenticated user is disabled.")
        await open.shutdown()
    }

    func testTheSizeLimitIsParsesError() async throws {
        let h = try await harness(maxUploadBytes: 1000)
        let alice = try h.signUp("alice")
        XCTAssertEqual(try upload(h, "ok.bin", [UInt8](repeating: 0x41, count: 1000), token: alice.token).status, 201)
        let big = try upload(h, "big.bin", [UInt8](repeating: 0x41, count: 1001), token: alice.token)
        XCTAssertEqual(big.status, 413, "a Content-Length over the limit: Parse Server's body-parser answer, before any byte is read")
        XCTAssertEqual(big["error"] as? String, "request entity too large")

        // Chunked, so the limit is found mid-body: Parse Server's streaming answer (130).
        let client = try TestHTTPClient(port: h.server.port)
        let chunk = String(repeating: "B", count: 600)
        try client.send("POST /parse/files/big.bin HTTP/1.1\r\nHost: x\r\nX-Parse-Application-Id: \(h.appID)\r\n"
                        + "X-Parse-Session-Token: \(alice.token)\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n")
        let chunked = try client.readResponse()
        XCTAssertEqual(chunked.status, 400)
        let error = chunked.json as? [String: Any]
        XCTAssertEqual(error?["code"] as? Int, 130)
        XCTAssertEqual(error?["error"] as? String, "File size exceeds maximum allowed: 1000 bytes.")

        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory)
        XCTAssertEqual(leftovers.count, 1, "a refused upload leaves nothing behind: \(leftovers)")
        XCTAssertEqual(try h.call("GET", "/parse/health").status, 200, "the server keeps serving")
        await h.shutdown()
    }
}
