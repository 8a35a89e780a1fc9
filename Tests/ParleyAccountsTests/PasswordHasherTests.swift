import ParleyAccounts
import ParleyNet
import XCTest

final class PasswordHasherTests: XCTestCase {
    func testHashVerifiesOnlyTheRightPasswordAndIsArgon2id() throws {
        let hasher = PasswordHasher(operationsLimit: 1, memoryLimit: 8192)
        let hash = try hasher.hashBlocking("correct horse")
        XCTAssertTrue(hash.hasPrefix("$argon2id$v=19$"), hash)
        XCTAssertTrue(hasher.verifyBlocking("correct horse", hash: hash))
        XCTAssertFalse(hasher.verifyBlocking("correct horsE", hash: hash))
        XCTAssertFalse(hasher.verifyBlocking("correct horse", hash: "garbage"))
        XCTAssertNotEqual(try hasher.hashBlocking("correct horse"), hash, "salted")
        XCTAssertFalse(hasher.dummyHash.isEmpty)
    }

    func testPoolVerificationOfUnknownUserIsFalse() async throws {
        let pool = try BlockingPool(threads: 1)
        defer { pool.shutdown() }
        let hasher = PasswordHasher(operationsLimit: 1, memoryLimit: 8192)
        let hash = try await hasher.hash("pw", on: pool)
        let okay = try await hasher.verify("pw", hash: hash, on: pool)
        let unknown = try await hasher.verify("pw", hash: nil, on: pool)
        XCTAssertTrue(okay)
        XCTAssertFalse(unknown)
        do {
            _ = try await hasher.hash(String(repeating: "x", count: PasswordHasher.maxPasswordBytes + 1), on: pool)
            XCTFail("expected a refusal")
        } catch {
            XCTAssertEqual(error.code, 201)
        }
    }

    func testIdentifiersHaveParseShapes() {
        let id = RandomID.objectID()
        XCTAssertEqual(id.count, 10)
        XCTAssertTrue(RandomID.isPlausibleObjectID(id))
        let token = RandomID.sessionToken()
        XCTAssertTrue(SessionStore.isWellFormed(token), token)
        XCTAssertFalse(SessionStore.isWellFormed("r:" + String(repeating: "G", count: 32)))
        XCTAssertNotEqual(RandomID.objectID(), RandomID.objectID())
        XCTAssertTrue(constantTimeEquals("abc", "abc"))
        XCTAssertFalse(constantTimeEquals("abc", "abd"))
        XCTAssertFalse(constantTimeEquals("abc", "abcd"))
    }
}
