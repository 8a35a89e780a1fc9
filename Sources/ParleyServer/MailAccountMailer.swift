import ParleyAccounts
import ParleyMail
import ParleyPostgres

/// The accounts module's mailer, backed by ParleyMail: the configured templates (`verify_email`,
/// `password_reset`), sender and app name, queued through `mail_enqueue` in the caller's
/// transaction.
struct MailAccountMailer: AccountMailer {
    let mail: MailService

    func enqueueStatement(_ kind: AccountMailKind, to email: String, username: String, link: String) -> (sql: String, params: [PostgresData])? {
        let template = kind == .verifyEmail ? mail.configuration.templates.verifyEmail : mail.configuration.templates.passwordReset
        guard let address = try? MailAddress(email),
              let message = try? mail.message(template, to: address, values: ["link": link, "username": username, "email": email]) else { return nil }
        return MailOutbox.enqueueStatement(message, kind: kind.rawValue)
    }

    func queued() {
        mail.wake()
    }
}
