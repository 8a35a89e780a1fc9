import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres

/// Mail of one node: the outbox, and (with an SMTP server configured) the worker that sends it.
/// Other modules queue mails with `send` or, inside their own transaction, with
/// `MailOutbox.enqueueStatement` followed by `wake`.
public final class MailService: Sendable {
    public let configuration: MailConfiguration
    public let outbox: MailOutbox
    /// Nil when no SMTP server is configured.
    public let worker: MailWorker?
    private let logger: Logger

    /// `blockingPool` resolves the SMTP host name (not needed for a numeric address).
    public init(database: PostgresClient, group: EventLoopGroup, configuration: MailConfiguration, blockingPool: BlockingPool? = nil,
                metrics registry: MetricsRegistry? = nil, logger: Logger = Logger(label: "mail")) {
        self.configuration = configuration
        self.logger = logger
        outbox = MailOutbox(database: database)
        if let smtp = configuration.smtp {
            var random = SystemRandomNumberGenerator()
            let id = String(random.next() & 0xFFFF_FFFF_FFFF, radix: 16)
            worker = MailWorker(outbox: outbox, client: SMTPClient(group: group, configuration: smtp, blockingPool: blockingPool), group: group,
                                configuration: configuration, nodeID: String(repeating: "0", count: 12 - id.count) + id,
                                metrics: MailMetrics(registry: registry ?? MetricsRegistry()), logger: logger)
        } else {
            worker = nil
        }
    }

    /// Queues a mail from the configured sender to `to`, rendered from `template` (the
    /// placeholder `appName` is filled in); returns its id.
    @discardableResult
    public func send(_ template: MailTemplate, to: MailAddress, values: [String: String], kind: String) async throws(MailError) -> Int64 {
        let id = try await outbox.enqueue(try message(template, to: to, values: values), kind: kind)
        wake()
        return id
    }

    /// The mail `send` would queue, for callers that queue it in their own transaction.
    public func message(_ template: MailTemplate, to: MailAddress, values: [String: String]) throws(MailError) -> MailMessage {
        var values = values
        values["appName"] = values["appName"] ?? configuration.appName
        let rendered = template.render(values)
        return try MailMessage(from: configuration.from, to: to, subject: rendered.subject, text: rendered.text, html: rendered.html)
    }

    /// Makes the worker look for due mails now.
    public func wake() {
        worker?.wake()
    }

    public func start() {
        if let worker, let smtp = configuration.smtp {
            logger.info("mail server", [("host", smtp.host), ("port", "\(smtp.port)"), ("security", smtp.security.rawValue)])
            worker.start()
        } else {
            logger.info("no SMTP server configured: no mail is sent")
        }
    }

    public func stop(timeout: Duration) {
        worker?.stop(timeout: timeout)
    }
}
