/// How mail is sent (`--smtp-*`, `--mail-*` options).
public struct MailConfiguration: Sendable {
    /// The SMTP server; nil = no mail: nothing is sent, queued mails wait.
    public var smtp: SMTPClient.Configuration?
    /// The sender of every mail.
    public var from: MailAddress
    /// The app's name, for templates.
    public var appName: String
    public var templates: MailTemplates
    /// Attempts before a mail is dead.
    public var maxAttempts: Int
    /// Delay before the second attempt; doubles per attempt (with jitter) up to `backoffMax`.
    public var backoffBase: Duration
    public var backoffMax: Duration
    /// Mails sent at once per node.
    public var concurrency: Int
    /// How often a node looks for due mails when nothing woke it.
    public var pollInterval: Duration
    /// Sent mails are deleted after this.
    public var retention: Duration

    public init(smtp: SMTPClient.Configuration?, from: MailAddress, appName: String = "Parley", templates: MailTemplates = MailTemplates(),
                maxAttempts: Int = 10, backoffBase: Duration = .seconds(30), backoffMax: Duration = .seconds(3600), concurrency: Int = 4,
                pollInterval: Duration = .seconds(5), retention: Duration = .seconds(7 * 86_400)) {
        self.smtp = smtp
        self.from = from
        self.appName = appName
        self.templates = templates
        self.maxAttempts = max(1, maxAttempts)
        self.backoffBase = backoffBase
        self.backoffMax = backoffMax
        self.concurrency = max(1, concurrency)
        self.pollInterval = pollInterval
        self.retention = retention
    }

    /// How long a claimed mail belongs to its node: longer than any delivery, so a slow one is
    /// not sent twice; a node that stops mid-send loses its mails to the others after this.
    public var lease: Duration { (smtp?.deliveryTimeout ?? .seconds(60)) * 2 + .seconds(5) }
}
