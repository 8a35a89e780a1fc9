import ParleyHTTP
@testable import ParleyRealtime
import XCTest

/// The one credential extraction of `/v1` requests (`RealtimeAuthenticator.authenticate(_:)`),
/// which `/v1/messages`, `/v1/calls` and `/v1/turn` share.
final class V1AuthenticationTests: XCTestCase {
    private func request(_ headers: [(String, String)]) throws -> HTTPRequest {
        var fields = HTTPHeaders()
        for (name, value) in headers { fields.add(name, value) }
        return HTTPRequest(head: try HTTPRequestHead(method: .get, target: "/v1/messages", headers: fields))
    }

    private func failure(_ sessions: TestSessions, _ headers: [(String, String)]) async throws -> RealtimeFailure? {
        do {
            _ = try await sessions.authenticate(try request(headers))
            return nil
        } catch let error as RealtimeFailure {
            return error
        }
    }

    func testBearerOrHeaderTokenAndEveryRefusal() async throws {
        let sessions = TestSessions()
        sessions.add(token: "r:alice", userId: "alice", expiresAt: 42)
        sessions.add(token: "r:bob", userId: "bob")
        let bearer = try await sessions.authenticate(try request([("Authorization", "Bearer r:alice")]))
        XCTAssertEqual(bearer, RealtimeIdentity(userId: "alice", sessionExpiresAt: 42))
        let lowercase = try await sessions.authenticate(try request([("authorization", "bearer r:alice")]))
        XCTAssertEqual(lowercase.userId, "alice")
        let header = try await sessions.authenticate(try request([("X-Parse-Session-Token", "r:bob")]))
        XCTAssertEqual(header.userId, "bob")
        let both = try await sessions.authenticate(try request([("Authorization", "Bearer r:alice"), ("X-Parse-Session-Token", "r:bob")]))
        XCTAssertEqual(both.userId, "bob", "the Parse header wins, as before")

        for headers in [[], [("Authorization", "Basic r:alice")], [("Authorization", "Bearer")], [("X-Parse-Session-Token", "")]] {
            let refused = try await failure(sessions, headers)
            XCTAssertEqual(refused, RealtimeFailure(.invalidSession, "a session token is required"), "\(headers)")
        }
        let unknown = try await failure(sessions, [("Authorization", "Bearer r:mallory")])
        XCTAssertEqual(unknown, RealtimeFailure(.invalidSession, "invalid session token"))
        sessions.setDown(true)
        let down = try await failure(sessions, [("Authorization", "Bearer r:alice")])
        XCTAssertEqual(down?.code, .unavailable)
        XCTAssertEqual(RealtimeRESTError(try XCTUnwrap(down)).response().status, 503)
        XCTAssertEqual(RealtimeRESTError(try XCTUnwrap(unknown)).response().status, 401)
    }
}
