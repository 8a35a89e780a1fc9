#if canImport(Glibc)
import Glibc
#endif
import ParleyPostgres

/// A mail's subject, plain-text body and optional HTML body with `{{name}}` placeholders.
/// Values are inserted as they are into the subject and text, HTML-escaped into the HTML.
public struct MailTemplate: Sendable, Equatable {
    public var subject: String
    public var text: String
    public var html: String?

    public init(subject: String, text: String, html: String? = nil) {
        self.subject = subject
        self.text = text
        self.html = html
    }

    /// The three parts with `values` filled in; a placeholder without a value becomes empty.
    public func render(_ values: [String: String]) -> (subject: String, text: String, html: String?) {
        (Self.fill(subject, values, escape: false), Self.fill(text, values, escape: false), html.map { Self.fill($0, values, escape: true) })
    }

    static func fill(_ template: String, _ values: [String: String], escape: Bool) -> String {
        let bytes = Array(template.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "{"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "{"),
               let close = Self.find("}}", in: bytes, from: index + 2) {
                let name = String(decoding: bytes[(index + 2)..<close], as: UTF8.self)[...].trimmingCharacters(" ")
                let value = values[name] ?? ""
                out += Array((escape ? Self.escapeHTML(value) : value).utf8)
                index = close + 2
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func find(_ needle: String, in bytes: [UInt8], from start: Int) -> Int? {
        let pattern = Array(needle.utf8)
        var index = start
        while index + pattern.count <= bytes.count {
            if bytes[index..<(index + pattern.count)].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }

    /// `&`, `<`, `>`, `"` and `'` as HTML character references.
    public static func escapeHTML(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}

/// The mails Parse's flows send, each a template with the placeholders `appName`, `link`,
/// `username` and `email`. Built-in texts, or files of a template directory.
public struct MailTemplates: Sendable, Equatable {
    public var verifyEmail: MailTemplate
    public var passwordReset: MailTemplate

    public init(verifyEmail: MailTemplate = MailTemplates.defaultVerifyEmail, passwordReset: MailTemplate = MailTemplates.defaultPasswordReset) {
        self.verifyEmail = verifyEmail
        self.passwordReset = passwordReset
    }

    /// Largest template file accepted, in bytes.
    public static let maxFileBytes = 64 * 1024

    /// The built-in templates, overridden by `<name>.subject`, `<name>.txt` and `<name>.html`
    /// files in `directory` (names `verify_email`, `password_reset`; each file optional).
    /// Blocking: call at startup.
    public static func load(directory: String?) throws(FileSystemError) -> MailTemplates {
        var templates = MailTemplates()
        guard let directory else { return templates }
        guard access(directory, R_OK | X_OK) == 0 else { throw FileSystemError(call: "access", path: directory, errno: errno) }
        templates.verifyEmail = try override(templates.verifyEmail, directory: directory, name: "verify_email")
        templates.passwordReset = try override(templates.passwordReset, directory: directory, name: "password_reset")
        return templates
    }

    private static func override(_ template: MailTemplate, directory: String, name: String) throws(FileSystemError) -> MailTemplate {
        var template = template
        if let subject = try optionalFile("\(directory)/\(name).subject") {
            template.subject = String(subject.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).first ?? "")
        }
        if let text = try optionalFile("\(directory)/\(name).txt") { template.text = text }
        if let html = try optionalFile("\(directory)/\(name).html") { template.html = html }
        return template
    }

    private static func optionalFile(_ path: String) throws(FileSystemError) -> String? {
        do {
            return String(decoding: try LocalFiles.read(path, limit: maxFileBytes), as: UTF8.self)
        } catch {
            if error.errno == 2 { return nil }
            throw error
        }
    }

    public static let defaultVerifyEmail = MailTemplate(
        subject: "Please verify your e-mail for {{appName}}",
        text: """
            Hi,

            You are being asked to confirm the e-mail address {{email}} with {{appName}}.

            Click here to confirm it:
            {{link}}
            """,
        html: """
            <!DOCTYPE html>
            <html><body>
            <p>Hi,</p>
            <p>You are being asked to confirm the e-mail address {{email}} with {{appName}}.</p>
            <p><a href="{{link}}">Confirm your e-mail address</a></p>
            </body></html>
            """)

    public static let defaultPasswordReset = MailTemplate(
        subject: "Password Reset for {{appName}}",
        text: """
            Hi,

            You requested to reset your password for {{appName}} ({{username}}).

            Click here to reset it:
            {{link}}

            If you did not ask for this, ignore this mail: your password stays as it is.
            """,
        html: """
            <!DOCTYPE html>
            <html><body>
            <p>Hi,</p>
            <p>You requested to reset your password for {{appName}} ({{username}}).</p>
            <p><a href="{{link}}">Reset your password</a></p>
            <p>If you did not ask for this, ignore this mail: your password stays as it is.</p>
            </body></html>
            """)
}

extension Substring {
    func trimmingCharacters(_ character: Character) -> String {
        var text = self
        while text.first == character { text.removeFirst() }
        while text.last == character { text.removeLast() }
        return String(text)
    }
}
