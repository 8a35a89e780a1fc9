import Foundation
import ParleyHTTP
@testable import ParleyIdentity
import ParleyJSON
import ParleyNet
import ParleyTestSupport
import XCTest

/// Facebook logins against the fake Graph API.
final class FacebookTests: XCTestCase {
    var env: IdentityStandIns!

    override func setUp() async throws {
        env = try IdentityStandIns()
    }

    override func tearDown() async throws {
        env.shutdown()
    }

    func facebook(secret: String? = nil, appIDs: [String] = ["fb-app"], graph: String? = nil) -> FacebookProvider {
        FacebookProvider(configuration: FacebookConfiguration(appIDs: appIDs, appSecret: secret, graphURL: (graph ?? "\(env.base)/graph") + "/",
                                                              timeout: .seconds(3)), client: env.client)
    }

    func testTokensAreCheckedWithAndWithoutAnAppSecret() async throws {
        try env.facebookToken("EAAB good/token+=", user: "fb-1")
        try env.facebookToken("other-app-token", user: "fb-1", app: "another-app")
        try env.facebookToken("revoked", user: "fb-1", valid: false)
        for secret in [nil, "fb-secret"] {
            let provider = facebook(secret: secret)
            let id = try await provider.validate(authData: ["id": "fb-1", "access_token": "EAAB good/token+="])
            XCTAssertEqual(id, "fb-1")
            for (what, authData) in [
                ("another user's token", ["id": "fb-2", "access_token": "EAAB good/token+="] as JSONObject),
                ("another app's token", ["id": "fb-1", "access_token": "other-app-token"]),
                ("revoked token", ["id": "fb-1", "access_token": "revoked"]),
                ("unknown token", ["id": "fb-1", "access_token": "nope"]),
            ] {
                await assertRefused("\(what) (secret \(secret ?? "none"))", { $0 == FacebookProvider.invalid }) { () async throws(IdentityError) -> String in
                    try await provider.validate(authData: authData)
                }
            }
        }
        // The app secret must be the right one: Graph refuses the app token otherwise.
        await assertRefused("wrong app secret", { $0 == FacebookProvider.invalid }) { () async throws(IdentityError) -> String in
            try await self.facebook(secret: "wrong").validate(authData: ["id": "fb-1", "access_token": "EAAB good/token+="])
        }
        await assertRefused("no access token", { $0.isMalformed }) { () async throws(IdentityError) -> String in
            try await self.facebook().validate(authData: ["id": "fb-1"])
        }
    }

    func testAnUnreachableGraphAPIIsUnavailable() async throws {
        let provider = facebook(graph: "http://127.0.0.1:\(FreePort.next())")
        await assertRefused("Graph down", { $0.isUnavailable }) { () async throws(IdentityError) -> String in
            try await provider.validate(authData: ["id": "fb-1", "access_token": "t"])
        }
    }
}
