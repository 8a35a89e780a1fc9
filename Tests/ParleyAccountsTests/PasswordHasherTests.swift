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

    func testJobsPastTheQueueBoundAreRefusedAtOnceAndPlacesComeBack() async throws {
        let pool = try BlockingPool(threads: 1)
        defer { pool.shutdown() }
        let hasher = PasswordHasher(maxPendingJobs: 2)
        let hash = try hasher.hashBlocking("pw")
        let answers = await withTaskGroup(of: (refused: Bool, seconds: Double).self) { group in
            for _ in 0..<12 {
                group.addTask {
                    let start = ContinuousClock.now
                    do {
                        _ = try await hasher.verify("pw", hash: hash, on: pool)
                        return (false, (ContinuousClock.now - start) / .seconds(1))
                    } catch let error as ParseError {
                        XCTAssertEqual(error, PasswordHasher.busy)
                        return (true, (ContinuousClock.now - start) / .seconds(1))
                    } catch {
                        XCTFail("\(error)")
                        return (false, 0)
                    }
                }
            }
            var all: [(refused: Bool, seconds: Double)] = []
            for await answer in group { all.append(answer) }
            return all
        }
        let refused = answers.filter { $0.refused }
        XCTAssertGreaterThanOrEqual(answers.count - refused.count, 2, "the first two jobs run")
        XCTAssertGreaterThanOrEqual(refused.count, 1, "jobs past the bound are refused")
        XCTAssertLessThan(refused.map { $0.seconds }.max() ?? 0, 0.05, "a refusal does not wait for a hash")
        XCTAssertEqual(hasher.pendingJobs.current, 0)
        let again = try await hasher.verify("pw", hash: hash, on: pool)
        XCTAssertTrue(again)
    }
}
