import Foundation
@testable import ParleyMail
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// The outbox in a real PostgreSQL, sent by the worker to the aiosmtpd stand-in.
final class MailOutboxTests: XCTestCase {
    var smtp: SMTPStandIn!
    var group: EventLoopGroup!
    var database: PostgresClient!

    override func setUp() async throws {
        smtp = try SMTPStandIn()
        group = try EventLoopGroup(threads: 2)
        let url = try TestPostgres.shared().makeDatabase(prefix: "mail")
        _ = try Migrator(connectionString: url, directory: ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path).migrate()
        database = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: url))
        database.start()
        try await database.waitUntilReady()
    }

    override func tearDown() async throws {
        await database.shutdown()
        group.shutdownGracefully()
        smtp.stop()
    }

    let registry = MetricsRegistry()

    func service(port: Int? = nil, maxAttempts: Int = 5) throws -> MailService {
        let smtp = SMTPClient.Configuration(host: "127.0.0.1", port: port ?? self.smtp.smtpPort, security: .none, commandTimeout: .seconds(2),
                                            deliveryTimeout: .seconds(3))
        return MailService(database: database, group: group, configuration: MailConfiguration(
            smtp: smtp, from: try MailAddress("no-reply@example.com", name: "Parley"), appName: "Test App", maxAttempts: maxAttempts,
            backoffBase: .milliseconds(50), backoffMax: .milliseconds(200), pollInterval: .milliseconds(100)), metrics: registry)
    }

    func rows() async throws -> [(id: Int, state: String, attempts: Int, error: String?)] {
        try await database.query("SELECT id, state, attempts, last_error FROM mail_outbox ORDER BY id", [], prepared: false).map {
            ($0["id"].int ?? 0, $0["state"].string ?? "", $0["attempts"].int ?? 0, $0["last_error"].string)
        }
    }

    func testQueuedMailIsRenderedAndSent() async throws {
        let mail = try service()
        mail.start()
        defer { mail.stop(timeout: .seconds(5)) }
        let id = try await mail.send(MailTemplates.defaultPasswordReset, to: MailAddress("alice@example.org"),
                                     values: ["link": "http://127.0.0.1/parse/apps/x/reset?token=abc", "username": "alice"], kind: "passwordReset")
        try await smtp.waitUntil("the mail arrived") { try smtp.messages().count == 1 }
        let data = try smtp.messages()[0].data
        XCTAssertTrue(data.contains("Subject: Password Reset for Test App"), data)
        XCTAssertTrue(data.contains("From: \"Parley\" <no-reply@example.com>"), data)
        XCTAssertTrue(data.contains("Message-ID: <parley.\(id)."), data)
        XCTAssertTrue(data.contains("token=3Dabc"), "the link, quoted-printable: \(data)")
        try await smtp.waitUntil("the row is sent") { try await rows().first?.state == "sent" }
        let settledRows = try await rows()
        XCTAssertEqual(settledRows.first?.attempts, 1)
    }

    func testTemporaryFailuresAreRetriedAndRefusalsAreDead() async throws {
        try smtp.configure(["tempfail_rcpt": 2, "reject": ["ghost@example.org"]])
        let mail = try service()
        mail.start()
        defer { mail.stop(timeout: .seconds(5)) }
        try await mail.send(MailTemplate(subject: "retried", text: "x"), to: MailAddress("bob@example.org"), values: [:], kind: "test")
        try await mail.send(MailTemplate(subject: "refused", text: "x"), to: MailAddress("ghost@example.org"), values: [:], kind: "test")
        try await smtp.waitUntil("both mails are settled") { try await rows().allSatisfy { $0.state == "sent" || $0.state == "dead" } }
        let settled = try await rows()
        let sent = settled.first { $0.state == "sent" }, dead = settled.first { $0.state == "dead" }
        XCTAssertNotNil(sent)
        XCTAssertEqual(dead?.attempts, 1, "a 550 is not retried")
        XCTAssertTrue(dead?.error?.contains("550") == true, "\(String(describing: dead?.error))")
        XCTAssertGreaterThanOrEqual(sent?.attempts ?? 0, 2, "the 451s were retried")
        XCTAssertEqual(try smtp.messages().map(\.to), [["bob@example.org"]])
        let metrics = registry.render()
        XCTAssertTrue(metrics.contains("parley_mail_sent_total 1"), metrics)
        XCTAssertTrue(metrics.contains("parley_mail_dead_total 1"), metrics)
        XCTAssertTrue(metrics.contains("parley_mail_retried_total 2") || metrics.contains("parley_mail_retried_total 3"), metrics)
    }

    func testAttemptsAreBoundedWhenTheServerIsDown() async throws {
        let mail = try service(port: FreePort.next(), maxAttempts: 3)
        mail.start()
        defer { mail.stop(timeout: .seconds(5)) }
        try await mail.send(MailTemplate(subject: "s", text: "x"), to: MailAddress("bob@example.org"), values: [:], kind: "test")
        try await smtp.waitUntil("the mail is dead") { try await rows().first?.state == "dead" }
        let settledRows = try await rows()
        XCTAssertEqual(settledRows.first?.attempts, 3)
    }

    func testExpiredClaimsAreRecoveredAndRolledBackMailsNeverExist() async throws {
        // A mail a stopped node had claimed: its lease ran out.
        try await database.query("""
            INSERT INTO mail_outbox (kind, sender, recipient, subject, text_body, state, attempts, next_attempt_at, node_id)
            VALUES ('test', 'no-reply@example.com', 'carol@example.org', 'orphan', 'x', 'sending', 1, now() - interval '1 second', 'dead-node')
            """, [], prepared: false)
        // A mail queued in a transaction that rolled back.
        let message = try MailMessage(from: MailAddress("no-reply@example.com"), to: MailAddress("dave@example.org"), subject: "never", text: "x")
        struct Rollback: Error {}
        do {
            try await database.transaction { transaction in
                let statement = MailOutbox.enqueueStatement(message, kind: "test")
                _ = try await transaction.query(statement.sql, statement.params)
                throw Rollback()
            }
        } catch is Rollback {}
        let mail = try service()
        mail.start()
        defer { mail.stop(timeout: .seconds(5)) }
        try await smtp.waitUntil("the orphan was sent") { try smtp.messages().count == 1 }
        XCTAssertEqual(try smtp.messages()[0].to, ["carol@example.org"])
        try await smtp.waitUntil("the row is sent") { try await rows().first?.state == "sent" }
        let settledRows = try await rows()
        XCTAssertEqual(settledRows.count, 1)
        XCTAssertEqual(settledRows.first?.attempts, 2)
    }

    func testManyMailsAreEachSentOnce() async throws {
        let mail = try service()
        mail.start()
        defer { mail.stop(timeout: .seconds(5)) }
        for index in 0..<30 {
            try await mail.send(MailTemplate(subject: "n\(index)", text: "x"), to: MailAddress("u\(index)@example.org"), values: [:], kind: "test")
        }
        try await smtp.waitUntil("30 mails arrived") { try smtp.messages().count >= 30 }
        try await smtp.waitUntil("all rows are sent") { try await rows().allSatisfy { $0.state == "sent" } }
        XCTAssertEqual(Set(try smtp.messages().flatMap(\.to)).count, 30)
        XCTAssertEqual(try smtp.messages().count, 30)
    }

    func testInvalidMailIsRefusedBeforeQueueing() async throws {
        let mail = try service()
        XCTAssertThrowsError(try MailAddress("bob@example.org>\r\nRCPT TO:<evil@example.com"))
        let recipient = try MailAddress("bob@example.org")
        do throws(MailError) {
            try await mail.send(MailTemplate(subject: "s", text: String(repeating: "x", count: MailMessage.maxBodyBytes + 1)),
                                to: recipient, values: [:], kind: "test")
            XCTFail("oversized mail queued")
        } catch {
            XCTAssertEqual(error, .tooLarge)
        }
        let settledRows = try await rows()
        XCTAssertEqual(settledRows.count, 0)
    }
}
