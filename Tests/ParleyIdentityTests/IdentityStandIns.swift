import Foundation
import ParleyHTTP
@testable import ParleyIdentity
import ParleyJSON
import ParleyNet
import ParleyTestSupport
import XCTest

/// The Python stand-ins for Apple, Google, OIDC providers and the Graph API, a loop group for
/// Parley's HTTP client, and helpers to mint tokens.
final class IdentityStandIns: @unchecked Sendable {
    let server: PythonStandIn
    let group: EventLoopGroup
    let client: HTTPClient

    init() throws {
        server = try PythonStandIn(script: "identity_standins.py")
        group = try EventLoopGroup(threads: 1)
        client = HTTPClient(group: group)
    }

    func shutdown() {
        client.shutdown()
        group.shutdownGracefully()
        server.stop()
    }

    var base: String { "http://127.0.0.1:\(server.port)" }

    func jwksURL(_ provider: String) -> HTTPClientURL { HTTPClientURL("\(base)/jwks/\(provider)")! }

    /// Makes keys `kids` for `provider` and publishes `publish` (default: every key it has).
    func keys(_ provider: String, kids: [String], alg: String = "RS256", publish: [String]? = nil, ttl: Int = 3600, status: Int = 200) throws {
        var body: [String: Any] = ["provider": provider, "kids": kids, "alg": alg, "ttl": ttl, "status": status]
        if let publish { body["publish"] = publish }
        try server.call("POST", "/control/keys", body)
    }

    /// A token signed by `kid` of `provider` with `claims` (or a forged one, see the script).
    func token(_ provider: String, kid: String, claims: [String: Any], alg: String? = nil, header: [String: Any] = [:], forge: String? = nil) throws -> String {
        var body: [String: Any] = ["provider": provider, "kid": kid, "claims": claims, "header": header]
        if let alg { body["alg"] = alg }
        if let forge { body["forge"] = forge }
        return try server.call("POST", "/control/sign", body)["token"] as! String
    }

    /// Claims valid now for `issuer`, `audience` and `subject`, changed by `edit`.
    func claims(issuer: String, audience: Any, subject: String, edit: (inout [String: Any]) -> Void = { _ in }) -> [String: Any] {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = ["iss": issuer, "aud": audience, "sub": subject, "iat": now, "exp": now + 600]
        edit(&claims)
        return claims
    }

    func fetches(_ provider: String) throws -> Int {
        let stats = try server.call("GET", "/control/stats")
        return (stats["fetches"] as? [String: Any])?[provider] as? Int ?? 0
    }

    func facebookToken(_ token: String, user: String, app: String = "fb-app", valid: Bool = true) throws {
        try server.call("POST", "/control/facebook", ["token": token, "user_id": user, "app_id": app, "valid": valid])
    }
}

/// Asserts that `body` fails with an `IdentityError` for which `matches` holds.
func assertRefused(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ matches: (IdentityError) -> Bool = { _ in true },
                   _ body: () async throws(IdentityError) -> String) async {
    do {
        let id = try await body()
        XCTFail("\(what): accepted as \(id)", file: file, line: line)
    } catch {
        XCTAssertTrue(matches(error), "\(what): refused with an unexpected error \(error)", file: file, line: line)
        XCTAssertTrue([101, 252].contains(error.parseCode), file: file, line: line)
    }
}

extension IdentityError {
    var isInvalidToken: Bool {
        if case .invalidToken = self { return true }
        return false
    }

    var isUnavailable: Bool {
        if case .providerUnavailable = self { return true }
        return false
    }

    var isMalformed: Bool {
        if case .malformedAuthData = self { return true }
        return false
    }
}
