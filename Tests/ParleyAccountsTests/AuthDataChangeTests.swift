@testable import ParleyAccounts
import ParleyJSON
import XCTest

/// How a write's `authData` member is taken apart before any provider is asked.
final class AuthDataChangeTests: XCTestCase {
    func testLinksUnlinksAndEmptyEntries() throws {
        let change = try AuthDataChange(.object(["apple": ["id": "a", "token": "t"], "google": .null, "facebook": .object([:])]))
        XCTAssertEqual(change.links.map(\.provider), ["apple"])
        XCTAssertEqual(change.unlinks, ["google"])
        XCTAssertEqual(change.providerNames, "apple")
        XCTAssertFalse(change.isEmpty)
        XCTAssertTrue(try AuthDataChange(.object([:])).isEmpty)
    }

    func testRefusedShapesAre252() {
        let tooMany = JSONObject((0...AuthDataChange.maxProviders).map { ("p\($0)", JSONValue.object(["id": "1"])) })
        for value: JSONValue in [.null, "anonymous", 5, ["anonymous": "x"], ["bad name": ["id": "1"]], ["": ["id": "1"]],
                                 .object([String(repeating: "p", count: 65): ["id": "1"]]), .object(tooMany)] {
            XCTAssertThrowsError(try AuthDataChange(value), "\(value)") { error in
                XCTAssertEqual((error as? ParseError)?.code, 252, "\(value)")
            }
        }
    }

    func testVerifiedIDMustBeTheOneSent() async throws {
        struct Proves: AuthDataVerifier {
            let id: String
            func verify(provider: String, data: JSONObject) async throws(ParseError) -> String { id }
        }
        var change = try AuthDataChange(.object(["anonymous": ["id": "mine"]]))
        try await change.verify(with: Proves(id: "mine"))
        XCTAssertEqual(change.links.first?.id, "mine")
        var forged = try AuthDataChange(.object(["anonymous": ["id": "mine"]]))
        do {
            try await forged.verify(with: Proves(id: "someone-else"))
            XCTFail("an id the data does not prove was accepted")
        } catch {
            XCTAssertEqual(error.code, 101)
        }
        var none = try AuthDataChange(.object(["anonymous": ["id": "x"]]))
        do {
            try await none.verify(with: NoAuthDataVerifier())
            XCTFail("no provider enabled must refuse")
        } catch {
            XCTAssertEqual(error.code, 252)
        }
    }
}
