import Foundation
@testable import ParleyMail
import ParleyNet
import XCTest

/// Message rendering, addresses and templates.
final class MailFormatTests: XCTestCase {
    func testQuotedPrintable() {
        XCTAssertEqual(MailMessage.quotedPrintable("a=b café \n.x"), "a=3Db caf=C3=A9=20\r\n.x")
        let long = MailMessage.quotedPrintable(String(repeating: "x", count: 200))
        XCTAssertTrue(long.split(separator: "\r\n").allSatisfy { $0.count <= 76 }, long)
        XCTAssertEqual(long.replacingOccurrencesOfSoftBreaks(), String(repeating: "x", count: 200))
    }

    func testHeadersAndAddresses() throws {
        XCTAssertEqual(MailMessage.encodedWord("Plain"), "Plain")
        XCTAssertEqual(MailMessage.encodedWord("Café"), "=?UTF-8?B?\(Base64.encode(Array("Café".utf8)))?=")
        XCTAssertEqual(try MailAddress(parsing: "\"My App\" <app@example.com>"), try MailAddress("app@example.com", name: "My App"))
        XCTAssertEqual(try MailAddress(parsing: "app@example.com").name, nil)
        for bad in ["", "no-at", "@example.com", "a@", "a b@example.com", "a@example.com\r\nBcc: x@y", "<a@b>", "a,b@c",
                    String(repeating: "a", count: 250) + "@b.cc"] {
            XCTAssertThrowsError(try MailAddress(bad), bad)
        }
        let message = try MailMessage(from: MailAddress("app@example.com", name: "App"), to: MailAddress("u@example.org"),
                                      subject: "Hi\r\nBcc: evil@example.com", text: "body")
        let text = String(decoding: message.rendered(id: 7, createdAt: 0, boundary: "b"), as: UTF8.self)
        XCTAssertTrue(text.contains("Subject: Hi  Bcc: evil@example.com\r\n"), "a subject cannot add headers")
        XCTAssertTrue(text.contains("Date: Thu, 01 Jan 1970 00:00:00 +0000\r\n"))
        XCTAssertTrue(text.contains("Message-ID: <parley.7.0@example.com>\r\n"))
        XCTAssertThrowsError(try MailMessage(from: MailAddress("a@b.cc"), to: MailAddress("c@d.ee"), subject: "",
                                             text: String(repeating: "x", count: MailMessage.maxBodyBytes + 1)))
    }

    func testTemplates() {
        let template = MailTemplate(subject: "Reset for {{appName}}", text: "Go to {{ link }} {{missing}}!", html: "<a href=\"{{link}}\">{{username}}</a>")
        let rendered = template.render(["appName": "Parley", "link": "https://x/y?a=1&b=2", "username": "<script>alert(1)</script>"])
        XCTAssertEqual(rendered.subject, "Reset for Parley")
        XCTAssertEqual(rendered.text, "Go to https://x/y?a=1&b=2 !")
        XCTAssertEqual(rendered.html, "<a href=\"https://x/y?a=1&amp;b=2\">&lt;script&gt;alert(1)&lt;/script&gt;</a>")
        XCTAssertEqual(MailTemplate.fill("{{unclosed", [:], escape: false), "{{unclosed")
        XCTAssertTrue(MailTemplates.defaultPasswordReset.text.contains("{{link}}"))
    }
}

extension String {
    func replacingOccurrencesOfSoftBreaks() -> String {
        split(separator: "\r\n").map { $0.hasSuffix("=") ? String($0.dropLast()) : String($0) }.joined()
    }
}

/// Templates read from a directory.
final class MailTemplateFilesTests: XCTestCase {
    func testDirectoryOverridesSomeParts() throws {
        let directory = NSTemporaryDirectory() + "parley-templates-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "Reset your {{appName}} password\nignored second line".write(toFile: directory + "/password_reset.subject", atomically: true, encoding: .utf8)
        try "Go: {{link}}".write(toFile: directory + "/password_reset.txt", atomically: true, encoding: .utf8)
        let templates = try MailTemplates.load(directory: directory)
        XCTAssertEqual(templates.passwordReset.subject, "Reset your {{appName}} password")
        XCTAssertEqual(templates.passwordReset.text, "Go: {{link}}")
        XCTAssertEqual(templates.passwordReset.html, MailTemplates.defaultPasswordReset.html, "no .html file: the built-in one")
        XCTAssertEqual(templates.verifyEmail, MailTemplates.defaultVerifyEmail)
        XCTAssertThrowsError(try MailTemplates.load(directory: directory + "/missing"))
        try String(repeating: "x", count: MailTemplates.maxFileBytes + 1).write(toFile: directory + "/verify_email.txt", atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try MailTemplates.load(directory: directory), "an oversized template")
    }
}
