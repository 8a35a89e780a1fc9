@testable import ParleyParse
import XCTest

/// The account pages' templates: every value escaped, unknown placeholders left alone.
final class AccountPagesTests: XCTestCase {
    func testValuesAreEscapedAndUnknownPlaceholdersKept() {
        let pages = AccountPages(appName: "<b>A&B</b>")
        let html = pages.render("<h1>{{appName}}</h1><p>{{username}}</p><i>{{other}}</i>{{unclosed", ["username": "\"'><script>"])
        XCTAssertEqual(html, "<h1>&lt;b&gt;A&amp;B&lt;/b&gt;</h1><p>&quot;&#39;&gt;&lt;script&gt;</p><i>{{other}}</i>{{unclosed")
    }

    func testDefaultFormCarriesTheTokenEscaped() {
        let pages = AccountPages()
        let html = pages.render(pages.choosePassword, ["token": "\"><x", "username": "u", "error": "", "action": "request_password_reset"])
        XCTAssertTrue(html.contains(#"name="token" value="&quot;&gt;&lt;x""#), html)
        XCTAssertFalse(html.contains("<script"), html)
    }
}
