import ParleyMetrics

/// The mail worker's Prometheus metrics (`parley_mail_*`).
public final class MailMetrics: Sendable {
    let sent: Counter
    let retried: Counter
    let dead: Counter

    public init(registry: MetricsRegistry) {
        sent = registry.counter("parley_mail_sent_total", help: "Mails the SMTP server accepted.")
        retried = registry.counter("parley_mail_retried_total", help: "Mail attempts that failed and were scheduled again.")
        dead = registry.counter("parley_mail_dead_total", help: "Mails refused for good or out of attempts (see mail_outbox.last_error).")
    }
}
