import ParleyPostgres

/// The mails the accounts module sends.
public enum AccountMailKind: String, Sendable {
    case verifyEmail = "verify_email"
    case passwordReset = "password_reset"
}

/// Renders an account mail into the statement that queues it in the durable outbox. The server
/// implements it over ParleyMail (templates, sender, `mail_enqueue`); the accounts module runs
/// the statement inside its own write, so a token and its mail commit together.
public protocol AccountMailer: Sendable {
    /// The statement queuing `kind` to `email`, with `link` and `username` filled in; nil when
    /// the address cannot take mail (the mail is then not sent).
    func enqueueStatement(_ kind: AccountMailKind, to email: String, username: String, link: String) -> (sql: String, params: [PostgresData])?
    /// Tells the mail worker that a mail was queued (after the commit).
    func queued()
}

/// No mail: account mails are dropped (tests and deployments without mail).
public struct NoAccountMailer: AccountMailer {
    public init() {}
    public func enqueueStatement(_ kind: AccountMailKind, to email: String, username: String, link: String) -> (sql: String, params: [PostgresData])? { nil }
    public func queued() {}
}
