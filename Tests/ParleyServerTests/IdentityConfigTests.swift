@testable import ParleyServer
import XCTest

/// The `--auth-*`, `--smtp-*`, `--mail-*` and `--password-*` options.
final class IdentityConfigTests: XCTestCase {
    func config(_ arguments: [String], environment: [String: String] = [:]) throws -> ServerConfig {
        try ServerConfig(ConfigValues(options: ServerConfig.options, arguments: arguments, environment: environment))
    }

    func testDefaultsEnableOnlyAnonymousAndNoMail() throws {
        let defaults = try config([])
        XCTAssertEqual(defaults.identity.enabledProviders, ["anonymous"])
        XCTAssertNil(defaults.mail.smtp)
        XCTAssertEqual(defaults.mail.from.address, "no-reply@localhost")
        XCTAssertFalse(defaults.accounts.passwordPolicy.checksNewPasswords)
    }

    func testProvidersAreEnabledByTheirSettings() throws {
        let set = try config([
            "--auth-apple-client-ids", "com.example.app, com.example.web", "--auth-apple-jwks-url", "http://127.0.0.1:9000/apple",
            "--auth-google-client-ids", "g1", "--auth-google-jwks-url", "http://127.0.0.1:9000/google",
            "--auth-facebook-app-ids", "123", "--auth-facebook-graph-url", "http://127.0.0.1:9000/graph/",
            "--auth-oidc-providers", "keycloak|https://id.example.com/realms/x|http://127.0.0.1:9000/kc|parley,web; okta|https://o.example.com|http://127.0.0.1:9000/okta|a",
            "--auth-anonymous", "false",
        ], environment: ["PARLEY_AUTH_FACEBOOK_APP_SECRET": "s"])
        XCTAssertEqual(set.identity.enabledProviders, ["apple", "google", "facebook", "keycloak", "okta"])
        XCTAssertEqual(set.identity.apple?.audiences, ["com.example.app", "com.example.web"])
        XCTAssertEqual(set.identity.facebook?.graphURL, "http://127.0.0.1:9000/graph")
        XCTAssertEqual(set.identity.facebook?.appSecret, "s")
        XCTAssertEqual(set.identity.openIDConnect.first?.audiences, ["parley", "web"])
    }

    func testBadSettingsAreRefused() throws {
        for arguments in [
            ["--auth-oidc-providers", "apple|https://x|http://127.0.0.1/k|a"],
            ["--auth-oidc-providers", "Bad Name|https://x|http://127.0.0.1/k|a"],
            ["--auth-oidc-providers", "kc|https://x|http://127.0.0.1/k|"],
            ["--auth-oidc-providers", "kc|https://x|http://127.0.0.1/k"],
            ["--smtp-host", "127.0.0.1", "--smtp-security", "none", "--smtp-username", "u"],
            ["--smtp-host", "127.0.0.1", "--smtp-security", "plain"],
            ["--mail-from", "not an address"],
            ["--mail-template-dir", "/nonexistent/dir/file-as-dir"],
            ["--password-pattern", "(unclosed"],
            ["--password-history", "21"],
            ["--password-reset-token-reuse", "true"],
        ] {
            XCTAssertThrowsError(try config(arguments), "\(arguments)")
        }
        XCTAssertNoThrow(try config(["--smtp-host", "127.0.0.1", "--smtp-security", "none", "--smtp-username", "u", "--smtp-allow-insecure-auth", "true"]))
        // https provider URLs (the Apple and Google defaults) and TLS for SMTP, with credentials.
        let secure = try config(["--auth-apple-client-ids", "com.example.app", "--smtp-host", "mail.example.com", "--smtp-username", "u",
                                 "--tls-ca-file", "/etc/parley/ca.pem"])
        XCTAssertEqual(secure.identity.apple?.jwksURL.isSecure, true)
        XCTAssertEqual(secure.identity.tlsCAFile, "/etc/parley/ca.pem")
        XCTAssertEqual(secure.mail.smtp?.security, .startTLS)
        XCTAssertEqual(secure.mail.smtp?.tlsCAFile, "/etc/parley/ca.pem")
        XCTAssertEqual(try config(["--smtp-host", "h", "--smtp-security", "tls", "--smtp-port", "465"]).mail.smtp?.security, .tls)
    }

    func testTLSListenerOptions() throws {
        XCTAssertNil(try config([]).tls)
        let two = try config(["--tls-cert", "a.pem, b.pem", "--tls-key", "a.key,b.key", "--tls-port", "8443", "--tls-handshake-timeout", "3s"])
        XCTAssertEqual(two.tls?.certificates.map(\.chainFile), ["a.pem", "b.pem"])
        XCTAssertEqual(two.tls?.certificates.map(\.keyFile), ["a.key", "b.key"])
        XCTAssertEqual(two.tls?.port, 8443)
        XCTAssertEqual(two.tls?.handshakeTimeout, .seconds(3))
        XCTAssertNil(try config(["--tls-cert", "a.pem", "--tls-key", "a.key"]).tls?.port, "TLS on --port itself")
        for arguments in [
            ["--tls-cert", "a.pem"],
            ["--tls-cert", "a.pem,b.pem", "--tls-key", "a.key"],
            ["--tls-key", "a.key"],
            ["--tls-port", "8443"],
            ["--tls-cert", "a.pem", "--tls-key", "a.key", "--tls-port", "99999"],
            ["--tls-cert", "a.pem", "--tls-key", "a.key", "--tls-handshake-timeout", "1ms"],
        ] {
            XCTAssertThrowsError(try config(arguments), "\(arguments)")
        }
    }

    func testPasswordPolicyOptions() throws {
        let set = try config(["--password-pattern", "[0-9]", "--password-no-username", "true", "--password-max-age", "90d",
                              "--password-history", "5", "--password-reset-token-validity", "2h", "--password-reset-token-reuse", "true"])
        let policy = set.accounts.passwordPolicy
        XCTAssertEqual(policy.validatorPattern, "[0-9]")
        XCTAssertTrue(policy.doNotAllowUsername)
        XCTAssertEqual(policy.maxPasswordAge, .seconds(90 * 86_400))
        XCTAssertEqual(policy.maxPasswordHistory, 5)
        XCTAssertEqual(policy.resetTokenValidityDuration, .seconds(7200))
        XCTAssertTrue(policy.resetTokenReuseIfValid)
    }
}
