import ParleyAccounts
import ParleyHTTP
import ParleyIdentity
import ParleyMail
import ParleyParse
import ParleyPostgres

/// Options of logins with authData (docs/identity.md), mail and the password policy.
extension ServerConfig {
    static let identityOptions: [ConfigOption] = [
        ConfigOption("app-name", env: "PARLEY_APP_NAME", default: "Parley", "The app's name, shown in mails and account pages."),
        ConfigOption("auth-anonymous", env: "PARLEY_AUTH_ANONYMOUS", default: "true", "Allow authData.anonymous logins (Parse's enableAnonymousUsers)."),
        ConfigOption("auth-apple-client-ids", env: "PARLEY_AUTH_APPLE_CLIENT_IDS", default: "", "Comma-separated bundle and service ids an Apple id_token may be for (aud); empty = Sign in with Apple disabled."),
        ConfigOption("auth-apple-jwks-url", env: "PARLEY_AUTH_APPLE_JWKS_URL", default: OpenIDConnectConfiguration.appleJWKS, "Where Apple's signing keys are fetched."),
        ConfigOption("auth-google-client-ids", env: "PARLEY_AUTH_GOOGLE_CLIENT_IDS", default: "", "Comma-separated OAuth client ids a Google id_token may be for (aud); empty = Google disabled."),
        ConfigOption("auth-google-jwks-url", env: "PARLEY_AUTH_GOOGLE_JWKS_URL", default: OpenIDConnectConfiguration.googleJWKS, "Where Google's signing keys are fetched."),
        ConfigOption("auth-facebook-app-ids", env: "PARLEY_AUTH_FACEBOOK_APP_IDS", default: "", "Comma-separated Facebook app ids an access token must belong to; empty = Facebook disabled."),
        ConfigOption("auth-facebook-app-secret", env: "PARLEY_AUTH_FACEBOOK_APP_SECRET", default: "", "The app secret of the first app id: tokens are then checked with /debug_token (else with /app)."),
        ConfigOption("auth-facebook-graph-url", env: "PARLEY_AUTH_FACEBOOK_GRAPH_URL", default: "https://graph.facebook.com", "The Graph API base URL (a version path may follow the host)."),
        ConfigOption("auth-oidc-providers", env: "PARLEY_AUTH_OIDC_PROVIDERS", default: "",
                     "More OpenID Connect providers, separated by ';', each name|issuer|jwks-url|client-id[,client-id…]; authData.<name> = {id, id_token}."),
        ConfigOption("auth-token-leeway", env: "PARLEY_AUTH_TOKEN_LEEWAY", default: "30s", "Clock skew allowed on a token's exp, nbf and iat."),
        ConfigOption("auth-jwks-refetch-interval", env: "PARLEY_AUTH_JWKS_REFETCH_INTERVAL", default: "30s", "Least time between two fetches of a provider's keys (a token with an unknown kid triggers one)."),
        ConfigOption("auth-request-timeout", env: "PARLEY_AUTH_REQUEST_TIMEOUT", default: "10s", "Deadline of one request to a login provider."),
    ]

    static let mailOptions: [ConfigOption] = [
        ConfigOption("smtp-host", env: "PARLEY_SMTP_HOST", default: "", "SMTP server for outgoing mail; empty = no mail is sent (queued mail waits)."),
        ConfigOption("smtp-port", env: "PARLEY_SMTP_PORT", default: "587", "SMTP port."),
        ConfigOption("smtp-security", env: "PARLEY_SMTP_SECURITY", default: "starttls",
                     "none (plain TCP, a relay on localhost or a private network), starttls (upgrade before anything is sent; a server not offering it is an error) or tls (TLS from the first byte, port 465). The server is verified against --tls-ca-file or the system store."),
        ConfigOption("smtp-username", env: "PARLEY_SMTP_USERNAME", default: "", "SMTP AUTH user (PLAIN or LOGIN); empty = no authentication."),
        ConfigOption("smtp-password", env: "PARLEY_SMTP_PASSWORD", default: "", "SMTP AUTH password."),
        ConfigOption("smtp-allow-insecure-auth", env: "PARLEY_SMTP_ALLOW_INSECURE_AUTH", default: "false",
                     "Send the SMTP credentials over an unencrypted connection (only for a relay you trust the path to)."),
        ConfigOption("smtp-helo-name", env: "PARLEY_SMTP_HELO_NAME", default: "localhost", "The name Parley gives in EHLO."),
        ConfigOption("smtp-timeout", env: "PARLEY_SMTP_TIMEOUT", default: "30s", "Longest wait for one SMTP reply; a whole delivery may take twice this."),
        ConfigOption("mail-from", env: "PARLEY_MAIL_FROM", default: "Parley <no-reply@localhost>", "Sender of every mail: address or Name <address>."),
        ConfigOption("mail-template-dir", env: "PARLEY_MAIL_TEMPLATE_DIR", default: "",
                     "Directory of mail templates overriding the built-in ones: verify_email and password_reset, each .subject, .txt and .html."),
        ConfigOption("mail-max-attempts", env: "PARLEY_MAIL_MAX_ATTEMPTS", default: "10", "Attempts before a mail is dead (a 5xx refusal is dead at once)."),
        ConfigOption("mail-backoff-base", env: "PARLEY_MAIL_BACKOFF_BASE", default: "30s", "Delay before the second attempt; doubles per attempt, with jitter."),
        ConfigOption("mail-backoff-max", env: "PARLEY_MAIL_BACKOFF_MAX", default: "1h", "Longest delay between attempts."),
        ConfigOption("mail-poll-interval", env: "PARLEY_MAIL_POLL_INTERVAL", default: "5s", "How often a node looks for due mails when nothing woke it."),
        ConfigOption("mail-retention", env: "PARLEY_MAIL_RETENTION", default: "7d", "Sent mails are deleted after this (dead ones stay)."),
    ]

    static let passwordPolicyOptions: [ConfigOption] = [
        ConfigOption("password-pattern", env: "PARLEY_PASSWORD_PATTERN", default: "", "A regular expression new passwords must match (Parse's validatorPattern); empty = any."),
        ConfigOption("password-pattern-error", env: "PARLEY_PASSWORD_PATTERN_ERROR", default: "", "The message of the 142 for a password the pattern refuses (Parse's validationError)."),
        ConfigOption("password-no-username", env: "PARLEY_PASSWORD_NO_USERNAME", default: "false", "Refuse passwords that contain the username (142)."),
        ConfigOption("password-max-age", env: "PARLEY_PASSWORD_MAX_AGE", default: "0", "A password older than this must be reset before logging in again (0 = no limit)."),
        ConfigOption("password-history", env: "PARLEY_PASSWORD_HISTORY", default: "0", "A new password may not be one of the last N (0-20; 0 = no check)."),
        ConfigOption("password-reset-token-validity", env: "PARLEY_PASSWORD_RESET_TOKEN_VALIDITY", default: "0", "How long a password-reset link works (0 = until used)."),
        ConfigOption("password-reset-token-reuse", env: "PARLEY_PASSWORD_RESET_TOKEN_REUSE", default: "false",
                     "A new reset request while a link is valid leaves the earlier links working (needs a validity)."),
        ConfigOption("verify-user-emails", env: "PARLEY_VERIFY_USER_EMAILS", default: "false",
                     "New and changed emails start with emailVerified false and get a verification mail (Parse's verifyUserEmails; needs --public-url)."),
        ConfigOption("prevent-login-with-unverified-email", env: "PARLEY_PREVENT_LOGIN_WITH_UNVERIFIED_EMAIL", default: "false",
                     "With --verify-user-emails: users with an unverified email cannot log in (205) and sign up without a session."),
        ConfigOption("email-verify-token-validity", env: "PARLEY_EMAIL_VERIFY_TOKEN_VALIDITY", default: "0", "How long a verification link works (0 = until used)."),
        ConfigOption("account-mails-per-hour", env: "PARLEY_ACCOUNT_MAILS_PER_HOUR", default: "5",
                     "Verification or reset mails sent to one user per hour; further requests are answered as usual and mail nothing."),
        ConfigOption("page-template-dir", env: "PARLEY_PAGE_TEMPLATE_DIR", default: "",
                     "Directory of account page templates overriding the built-in ones: choose_password.html, password_reset_success.html, verify_email_success.html, invalid_link.html."),
    ]

    /// The account pages: the built-in templates, overridden by the files of `--page-template-dir`.
    static func accountPages(_ values: ConfigValues, appName: String) throws(ConfigError) -> AccountPages {
        var texts: [String?] = Array(repeating: nil, count: AccountPages.fileNames.count)
        if let directory = values.optionalString("page-template-dir") {
            for (index, name) in AccountPages.fileNames.enumerated() {
                do {
                    texts[index] = String(decoding: try LocalFiles.read(directory + "/" + name, limit: MailTemplates.maxFileBytes), as: UTF8.self)
                } catch {
                    if error.errno == 2 { continue }
                    throw .invalidValue(option: values.origin("page-template-dir"), value: directory, expected: "a readable directory (\(error))")
                }
            }
        }
        return AccountPages(appName: appName, choosePassword: texts[0], passwordResetSuccess: texts[1], verifyEmailSuccess: texts[2], invalidLink: texts[3])
    }

    /// An `https://` (or `http://`) URL of a login provider.
    static func providerURL(_ values: ConfigValues, _ key: String, _ text: String? = nil) throws(ConfigError) -> HTTPClientURL {
        let raw = text ?? values.string(key)
        guard let url = HTTPClientURL(raw) else {
            throw .invalidValue(option: values.origin(key), value: raw, expected: "an https:// or http:// URL")
        }
        return url
    }

    static func identityConfiguration(_ values: ConfigValues) throws(ConfigError) -> IdentityConfiguration {
        var identity = IdentityConfiguration(
            anonymous: try values.bool("auth-anonymous"), leeway: try values.duration("auth-token-leeway"),
            jwksRefetchInterval: try values.duration("auth-jwks-refetch-interval"), requestTimeout: try values.duration("auth-request-timeout"))
        let apple = values.list("auth-apple-client-ids")
        if !apple.isEmpty { identity.apple = .apple(jwksURL: try providerURL(values, "auth-apple-jwks-url"), audiences: apple) }
        let google = values.list("auth-google-client-ids")
        if !google.isEmpty { identity.google = .google(jwksURL: try providerURL(values, "auth-google-jwks-url"), audiences: google) }
        let facebook = values.list("auth-facebook-app-ids")
        if !facebook.isEmpty {
            let graph = FacebookConfiguration(appIDs: facebook, appSecret: values.optionalString("auth-facebook-app-secret"),
                                              graphURL: values.string("auth-facebook-graph-url"), timeout: identity.requestTimeout)
            _ = try providerURL(values, "auth-facebook-graph-url", graph.graphURL + "/me")
            identity.facebook = graph
        }
        let builtIn = Set(["anonymous", "apple", "google", "facebook"])
        for entry in values.string("auth-oidc-providers").split(separator: ";") where !entry.allSatisfy({ $0 == " " }) {
            let fields = entry.split(separator: "|", omittingEmptySubsequences: false).map { String($0).trimmingSpaces() }
            let expected = "name|issuer|jwks-url|client-id[,client-id…] entries separated by ';'"
            guard fields.count == 4, let name = fields.first, !name.isEmpty, name.utf8.count <= 64,
                  name.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || (48...57).contains($0) || (97...122).contains($0) }),
                  !builtIn.contains(name), !identity.openIDConnect.contains(where: { $0.name == name }), !fields[1].isEmpty
            else { throw .invalidValue(option: values.origin("auth-oidc-providers"), value: String(entry), expected: expected) }
            let audiences = fields[3].split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
            guard !audiences.isEmpty else { throw .invalidValue(option: values.origin("auth-oidc-providers"), value: String(entry), expected: expected) }
            identity.openIDConnect.append(OpenIDConnectConfiguration(
                name: name, issuers: [fields[1]], jwksURL: try providerURL(values, "auth-oidc-providers", fields[2]), audiences: audiences))
        }
        return identity
    }

    static func mailConfiguration(_ values: ConfigValues, appName: String) throws(ConfigError) -> MailConfiguration {
        let from: MailAddress
        do {
            from = try MailAddress(parsing: values.string("mail-from"))
        } catch {
            throw .invalidValue(option: values.origin("mail-from"), value: values.string("mail-from"), expected: "an address or Name <address>")
        }
        let templates: MailTemplates
        do {
            templates = try MailTemplates.load(directory: values.optionalString("mail-template-dir"))
        } catch {
            throw .invalidValue(option: values.origin("mail-template-dir"), value: values.string("mail-template-dir"), expected: "a readable directory (\(error))")
        }
        var smtp: SMTPClient.Configuration?
        if let host = values.optionalString("smtp-host") {
            guard let security = SMTPSecurity(rawValue: values.string("smtp-security")) else {
                throw .invalidValue(option: values.origin("smtp-security"), value: values.string("smtp-security"), expected: "none, starttls or tls")
            }
            var credentials: SMTPCredentials?
            if let username = values.optionalString("smtp-username") {
                credentials = SMTPCredentials(username: username, password: values.string("smtp-password"))
            }
            let allowInsecure = try values.bool("smtp-allow-insecure-auth")
            if credentials != nil && security == .none && !allowInsecure {
                throw .invalidValue(option: values.origin("smtp-username"), value: "(set)",
                                    expected: "no credentials over an unencrypted connection, unless --smtp-allow-insecure-auth")
            }
            let timeout = try values.duration("smtp-timeout")
            guard timeout >= .milliseconds(100) else {
                throw .invalidValue(option: values.origin("smtp-timeout"), value: values.string("smtp-timeout"), expected: "a duration of at least 100ms")
            }
            smtp = SMTPClient.Configuration(host: host, port: try values.int("smtp-port", in: 1...65535), security: security, credentials: credentials,
                                            allowInsecureAuthentication: allowInsecure, heloName: values.string("smtp-helo-name"),
                                            connectTimeout: min(timeout, .seconds(10)), commandTimeout: timeout, deliveryTimeout: timeout * 2,
                                            tlsCAFile: values.optionalString("tls-ca-file"))
        }
        var durations: [String: Duration] = [:]
        for key in ["mail-backoff-base", "mail-backoff-max", "mail-poll-interval", "mail-retention"] {
            let value = try values.duration(key)
            guard value >= .milliseconds(10) else {
                throw .invalidValue(option: values.origin(key), value: values.string(key), expected: "a duration of at least 10ms")
            }
            durations[key] = value
        }
        return MailConfiguration(smtp: smtp, from: from, appName: appName, templates: templates,
                                 maxAttempts: try values.int("mail-max-attempts", in: 1...1000), backoffBase: durations["mail-backoff-base"]!,
                                 backoffMax: durations["mail-backoff-max"]!, pollInterval: durations["mail-poll-interval"]!,
                                 retention: durations["mail-retention"]!)
    }

    static func passwordPolicy(_ values: ConfigValues) throws(ConfigError) -> PasswordPolicy {
        let age = try values.duration("password-max-age")
        let validity = try values.duration("password-reset-token-validity")
        let noUsername = try values.bool("password-no-username")
        let history = try values.int("password-history", in: 0...PasswordPolicy.maxHistory)
        let reuse = try values.bool("password-reset-token-reuse")
        do throws(PasswordPolicyError) {
            return try PasswordPolicy(
                validatorPattern: values.optionalString("password-pattern"), validationError: values.optionalString("password-pattern-error"),
                doNotAllowUsername: noUsername, maxPasswordAge: age > .zero ? age : nil, maxPasswordHistory: history,
                resetTokenValidityDuration: validity > .zero ? validity : nil, resetTokenReuseIfValid: reuse)
        } catch {
            switch error {
            case .invalidPattern(let pattern):
                throw .invalidValue(option: values.origin("password-pattern"), value: pattern, expected: "a regular expression")
            case .invalidHistory(let count):
                throw .invalidValue(option: values.origin("password-history"), value: "\(count)", expected: "0...20")
            case .reuseWithoutValidity:
                throw .invalidValue(option: values.origin("password-reset-token-reuse"), value: "true", expected: "false unless --password-reset-token-validity is set")
            }
        }
    }
}
