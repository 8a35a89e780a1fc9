@testable import ParleyRealtime
import XCTest

/// Relays between nodes: split into NOTIFY-sized chunks and put back together in any order.
final class RelayMessageTests: XCTestCase {
    func testShortBodyIsOneChunk() throws {
        let payloads = try XCTUnwrap(RelayMessage.payloads("h call. {\"op\":\"x\"}", id: "ab"))
        XCTAssertEqual(payloads, ["c ab 0 1 h call. {\"op\":\"x\"}"])
        var assembler = RelayAssembler()
        guard case .chunk(let id, let index, let count, let data) = ClusterMessage.parse(payloads[0]).first else { return XCTFail("not a chunk") }
        XCTAssertEqual(assembler.add(id: id, index: index, count: count, data: data), "h call. {\"op\":\"x\"}")
    }

    func testLongBodyWithMultibyteCharactersIsSplitAndReassembledInAnyOrder() throws {
        let body = "d user device " + String(repeating: "é€😀 x", count: 3000)
        let payloads = try XCTUnwrap(RelayMessage.payloads(body, id: "f00d"))
        XCTAssertGreaterThan(payloads.count, 2)
        XCTAssertTrue(payloads.allSatisfy { $0.utf8.count < 8000 }, "every payload fits NOTIFY")
        var assembler = RelayAssembler()
        var whole: [String] = []
        for payload in payloads.reversed() {
            guard case .chunk(let id, let index, let count, let data) = ClusterMessage.parse(payload).first else { return XCTFail("not a chunk") }
            if let body = assembler.add(id: id, index: index, count: count, data: data) { whole.append(body) }
        }
        XCTAssertEqual(whole, [body])
        XCTAssertEqual(assembler.pendingCount, 0)
    }

    func testTooLongBodyIsRefused() {
        XCTAssertNil(RelayMessage.payloads(String(repeating: "a", count: RelayMessage.chunkBytes * RelayMessage.maxChunks + 1), id: "1"))
    }

    func testPartialMessagesAreBounded() {
        var assembler = RelayAssembler(maxPending: 4)
        for n in 0..<10 { XCTAssertNil(assembler.add(id: "m\(n)", index: 0, count: 2, data: "x")) }
        XCTAssertEqual(assembler.pendingCount, 4)
        XCTAssertNil(assembler.add(id: "m0", index: 1, count: 2, data: "y"), "the oldest was dropped")
        XCTAssertEqual(assembler.add(id: "m9", index: 1, count: 2, data: "y"), "xy")
        XCTAssertNil(assembler.add(id: "bad", index: 3, count: 2, data: "y"))
    }

    func testMalformedChunkLinesAreSkipped() {
        XCTAssertEqual(ClusterMessage.parse("c id 2 2 x\nc id x 2 y\nc id 0 0 z\nc id 0 1"), [])
        XCTAssertEqual(ClusterMessage.parse("c id 1 2 a b  c"), [.chunk(id: "id", index: 1, count: 2, data: "a b  c")])
    }
}
