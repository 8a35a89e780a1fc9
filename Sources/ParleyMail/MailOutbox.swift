import ParleyNet
import ParleyPostgres

/// The `mail_outbox` table: queueing (also through the `mail_enqueue` SQL function, for other
/// modules' transactions), claims with `FOR UPDATE SKIP LOCKED`, outcomes, lease recovery,
/// retention.
public struct MailOutbox: Sendable {
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// The statement that queues `message` as `kind`: run it on any connection or transaction
    /// (`PostgresClient` or `PostgresTransaction`) so the mail commits with its cause.
    public static func enqueueStatement(_ message: MailMessage, kind: String) -> (sql: String, params: [PostgresData]) {
        ("SELECT mail_enqueue($1, $2, $3, $4, $5, $6, $7) AS id", [
            .text(String(kind.prefix(64))), .text(message.from.address), .text(message.from.name ?? ""), .text(message.to.address),
            .text(message.subject), .text(message.text), message.html.map(PostgresData.text) ?? .null,
        ])
    }

    /// Queues `message`; returns its id.
    @discardableResult
    public func enqueue(_ message: MailMessage, kind: String) async throws(MailError) -> Int64 {
        let statement = Self.enqueueStatement(message, kind: kind)
        let rows = try await run(statement.sql, statement.params)
        guard let id = rows.first?["id"].int else { throw .database("mail_enqueue returned no id") }
        return Int64(id)
    }

    /// A claimed mail.
    public struct Claimed: Sendable {
        public var id: Int64
        public var attempt: Int
        public var kind: String
        public var message: MailMessage
        /// Unix milliseconds.
        public var createdAt: Int64
    }

    /// Claims up to `limit` due mails for `node` until `lease` from now (attempts + 1).
    public func claim(limit: Int, node: String, lease: Duration) async throws(MailError) -> [Claimed] {
        let rows = try await run("""
            WITH due AS (
                SELECT id FROM mail_outbox
                 WHERE state = 'pending' AND next_attempt_at <= now()
                 ORDER BY next_attempt_at, id
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED
            )
            UPDATE mail_outbox m
               SET state = 'sending', attempts = m.attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond',
                   node_id = $3, updated_at = now()
              FROM due WHERE m.id = due.id
            RETURNING m.id, m.attempts, m.kind, m.sender, m.sender_name, m.recipient, m.subject, m.text_body, m.html_body, m.created_at
            """, [.int(limit), .int(Int(lease.wholeMilliseconds)), .text(node)])
        return rows.compactMap { row in
            guard let id = row["id"].int, let sender = row["sender"].string, let recipient = row["recipient"].string,
                  let from = try? MailAddress(sender, name: row["sender_name"].string), let to = try? MailAddress(recipient),
                  let message = try? MailMessage(from: from, to: to, subject: row["subject"].string ?? "", text: row["text_body"].string ?? "",
                                                 html: row["html_body"].string)
            else { return nil }
            return Claimed(id: Int64(id), attempt: row["attempts"].int ?? 1, kind: row["kind"].string ?? "", message: message,
                           createdAt: row["created_at"].timestampMilliseconds ?? 0)
        }
    }

    /// What became of one attempt.
    public enum Outcome: Sendable, Equatable {
        case sent
        /// A temporary failure: due again after `delay` (dead when the attempts are used up).
        case retry(error: String, delay: Duration)
        /// The server refused the mail for good.
        case dead(error: String)
    }

    /// Records an attempt's outcome where the claim still holds (same attempt, still `sending`).
    /// Returns the new state, nil when the claim was lost.
    @discardableResult
    public func finish(id: Int64, attempt: Int, outcome: Outcome, maxAttempts: Int) async throws(MailError) -> String? {
        let (kind, error, delay): (String, String, Duration) = switch outcome {
        case .sent: ("sent", "", .zero)
        case .retry(let error, let delay): ("retry", error, delay)
        case .dead(let error): ("dead", error, .zero)
        }
        let rows = try await run("""
            UPDATE mail_outbox
               SET state = CASE WHEN $3 = 'retry' THEN CASE WHEN attempts >= $6 THEN 'dead' ELSE 'pending' END ELSE $3 END,
                   next_attempt_at = CASE WHEN $3 = 'retry' THEN now() + $4 * interval '1 millisecond' ELSE next_attempt_at END,
                   sent_at = CASE WHEN $3 = 'sent' THEN now() ELSE sent_at END,
                   last_error = nullif($5, ''), updated_at = now()
             WHERE id = $1 AND attempts = $2 AND state = 'sending'
            RETURNING state
            """, [.int(Int(id)), .int(attempt), .text(kind), .int(Int(delay.wholeMilliseconds)), .text(String(error.prefix(1000))), .int(maxAttempts)])
        return rows.first?["state"].string
    }

    /// Returns mails whose claim expired (their node stopped mid-send) to `pending`, due now,
    /// or `dead` when their attempts are used up. Returns how many.
    @discardableResult
    public func recoverExpiredLeases(maxAttempts: Int) async throws(MailError) -> Int {
        let rows = try await run("""
            UPDATE mail_outbox
               SET state = CASE WHEN attempts >= $1 THEN 'dead' ELSE 'pending' END, next_attempt_at = now(), updated_at = now(),
                   last_error = 'the node sending it stopped (lease expired)'
             WHERE state = 'sending' AND next_attempt_at < now()
            RETURNING id
            """, [.int(maxAttempts)])
        return rows.count
    }

    /// Deletes sent mails older than `olderThan`, `batch` at a time (dead ones stay for operators).
    public func deleteSent(olderThan: Duration, batch: Int = 10_000) async throws(MailError) -> Int {
        var total = 0
        while true {
            let rows = try await run("""
                DELETE FROM mail_outbox WHERE id IN (
                    SELECT id FROM mail_outbox WHERE state = 'sent' AND updated_at < now() - $1 * interval '1 millisecond' LIMIT $2)
                RETURNING 1
                """, [.int(Int(olderThan.wholeMilliseconds)), .int(batch)])
            total += rows.count
            if rows.count < batch { return total }
        }
    }

    private func run(_ sql: String, _ params: [PostgresData]) async throws(MailError) -> PostgresRows {
        do {
            return try await database.query(sql, params)
        } catch {
            throw .database(error.description)
        }
    }
}
