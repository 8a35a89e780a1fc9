import ParleyAccounts
import ParleyHTTP
import ParleyLog

/// The server-rendered account pages under the mount path, where mailed links lead (Parse
/// Server's `/apps/:appId/verify_email` and `/apps/:appId/request_password_reset`): plain HTML
/// forms, no JavaScript, every value HTML-escaped. Templates are configurable
/// (`--page-template-dir`); placeholders `{{appName}}`, `{{username}}`, `{{token}}`,
/// `{{action}}`, `{{error}}`.
public struct AccountPages: Sendable, Equatable {
    public var appName: String
    /// The form that sets a new password (GET of a reset link, and again after a refused password).
    public var choosePassword: String
    public var passwordResetSuccess: String
    public var verifyEmailSuccess: String
    /// An unknown, used or expired link.
    public var invalidLink: String

    /// Template file names in `--page-template-dir`, in the order of the members above.
    public static let fileNames = ["choose_password.html", "password_reset_success.html", "verify_email_success.html", "invalid_link.html"]
    /// Largest form body accepted on the reset page, in bytes.
    static let maxFormBytes = 8 * 1024

    public init(appName: String = "Parley", choosePassword: String? = nil, passwordResetSuccess: String? = nil,
                verifyEmailSuccess: String? = nil, invalidLink: String? = nil) {
        self.appName = appName
        self.choosePassword = choosePassword ?? Self.defaultChoosePassword
        self.passwordResetSuccess = passwordResetSuccess ?? Self.defaultPasswordResetSuccess
        self.verifyEmailSuccess = verifyEmailSuccess ?? Self.defaultVerifyEmailSuccess
        self.invalidLink = invalidLink ?? Self.defaultInvalidLink
    }

    /// `template` with every `{{name}}` of `values` (and `appName`) replaced by its HTML-escaped value.
    func render(_ template: String, _ values: [String: String] = [:]) -> String {
        var values = values
        values["appName"] = appName
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstRange(of: "{{") {
            out += rest[..<open.lowerBound]
            let after = rest[open.upperBound...]
            guard let close = after.firstRange(of: "}}") else {
                out += rest[open.lowerBound...]
                return out
            }
            let name = String(after[..<close.lowerBound])
            if let value = values[name] {
                out += Self.escapeHTML(value)
            } else {
                out += rest[open.lowerBound..<close.upperBound]
            }
            rest = after[close.upperBound...]
        }
        out += rest
        return out
    }

    /// `&`, `<`, `>`, `"` and `'` as character references.
    static func escapeHTML(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// An HTML answer that no cache keeps, no frame shows and no referrer leaks (the token is in the URL).
    static func response(_ status: HTTPStatus, _ html: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: [
            "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ], body: html)
    }

    static let style = "<style>body{font-family:sans-serif;max-width:28em;margin:3em auto;padding:0 1em}label,input,button{display:block;margin:.4em 0}.error{color:#a00}</style>"

    public static let defaultChoosePassword = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>{{appName}}: choose a new password</title>\(style)</head>
        <body><h1>{{appName}}</h1>
        <p>Choose a new password for <strong id="username">{{username}}</strong>.</p>
        <p class="error" id="error">{{error}}</p>
        <form method="post" action="{{action}}">
        <input type="hidden" name="token" value="{{token}}">
        <label for="new_password">New password</label><input id="new_password" name="new_password" type="password" autocomplete="new-password" required>
        <label for="confirm_password">Repeat it</label><input id="confirm_password" name="confirm_password" type="password" autocomplete="new-password" required>
        <button id="submit" type="submit">Set password</button>
        </form></body></html>
        """

    public static let defaultPasswordResetSuccess = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>{{appName}}: password changed</title>\(style)</head>
        <body><h1>{{appName}}</h1><p id="success">The password of <strong>{{username}}</strong> was changed. You can log in with it now; every other device was logged out.</p></body></html>
        """

    public static let defaultVerifyEmailSuccess = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>{{appName}}: email verified</title>\(style)</head>
        <body><h1>{{appName}}</h1><p id="success">Thank you, <strong>{{username}}</strong>: your email address is verified.</p></body></html>
        """

    public static let defaultInvalidLink = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>{{appName}}: invalid link</title>\(style)</head>
        <body><h1>{{appName}}</h1><p id="invalid">This link is invalid, used or expired. Ask the app for a new one.</p></body></html>
        """
}
