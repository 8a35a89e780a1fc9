import ParleyJSON
import ParleyLog
import ParleyPostgres

/// Stores messages (one statement per group-commit batch) and reads conversation history.
public final class MessageStore: Sendable {
    public let queue: DeliveryQueue
    let contacts: ContactDirectory

    public init(queue: DeliveryQueue, contacts: ContactDirectory) {
        self.queue = queue
        self.contacts = contacts
    }

    /// One message of a batch.
    struct Send {
        var request: SendMessageRequest
        var sender: String
        /// The sending device, left out of the fan-out; "" for none (REST).
        var senderDevice: String
        var messageID: String
        var sentAt: Int64
        var completion: (Result<SendResult, RealtimeFailure>) -> Void
    }

    /// Stores `batch` in one statement (one commit), hands the events to this node's connections,
    /// then completes every send (after the commit). The same statement records that each sender
    /// reached its recipients (`rt_add_contacts`), for the pairs this node does not know of yet.
    ///
    /// A send whose clientMessageId another transaction stored concurrently (a re-send racing the
    /// original) is reported by the statement as having no recipients, because the statement's
    /// snapshot predates the other commit; such sends are run once more, alone, to get the stored
    /// message.
    func commit(_ batch: [Send], isRetry: Bool = false) async {
        var recipientIndex: [Int] = []
        var recipientUser: [String] = []
        var pairs: [(from: String, to: String)] = []
        for (index, send) in batch.enumerated() {
            for user in send.request.to {
                recipientIndex.append(index + 1)
                recipientUser.append(user)
                pairs.append((send.sender, user))
            }
        }
        let newContacts = contacts.unrecorded(pairs)
        // Between users who wrote to each other before, the batch statement alone.
        let sql = newContacts.isEmpty
            ? "SELECT * FROM rt_send_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            : "SELECT b.* FROM \(RealtimeSQLFunctions.addContacts)($12::text[], $13::text[]) c, rt_send_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) b"
        let contactParameters: [PostgresData] = newContacts.isEmpty ? [] : [
            .text(SQLArray.literal(newContacts.map(\.from))), .text(SQLArray.literal(newContacts.map(\.to))),
        ]
        let rows: PostgresRows
        do {
            rows = try await queue.run(sql, [
                .text(SQLArray.literal(1...batch.count)),
                .text(SQLArray.literal(batch.map(\.messageID))),
                .text(SQLArray.literal(batch.map(\.sender))),
                .text(SQLArray.literal(batch.map(\.senderDevice))),
                .text(SQLArray.literal(batch.map(\.request.clientMessageId))),
                .text(SQLArray.literal(batch.map(\.request.text))),
                .text(SQLArray.literal(batch.map(\.request.headersJSON))),
                .text(SQLArray.literal(batch.map(\.sentAt))),
                .text(SQLArray.literal(recipientIndex)),
                .text(SQLArray.literal(recipientUser)),
                .text(queue.nodeID),
            ] + contactParameters)
        } catch {
            for send in batch { send.completion(.failure(error)) }
            return
        }
        contacts.remember(newContacts)

        var results = [Result<SendResult, RealtimeFailure>?](repeating: nil, count: batch.count)
        var templates = [MessageFrameTemplate?](repeating: nil, count: batch.count)
        var events: [(device: DeviceKey, seq: Int64)] = []
        var eventMessage: [Int] = []
        var enqueued: [EnqueuedEvent] = []
        var retry: [Int] = []
        for row in rows {
            guard let index = row["idx"].int.map({ $0 - 1 }), batch.indices.contains(index) else { continue }
            let send = batch[index]
            switch row["status"].string {
            case "event":
                guard let user = row["user_id"].string, let device = row["device_id"].string, let seq = row["seq"].int else { continue }
                let key = DeviceKey(userId: user, deviceId: device)
                events.append((key, Int64(seq)))
                eventMessage.append(index)
                enqueued.append(EnqueuedEvent(device: key, seq: Int64(seq), kind: "message", connected: row["node_id"].string != nil))
            case "sent", "duplicate":
                let recipients = row["recipients"].string.flatMap(SQLArray.parse) ?? []
                let known = Set(recipients)
                let result = SendResult(
                    messageId: row["message_id"].string ?? send.messageID,
                    sentAt: row["sent_at"].timestampMilliseconds ?? send.sentAt,
                    recipients: recipients,
                    failed: send.request.to.filter { !known.contains($0) },
                    duplicate: row["status"].string == "duplicate")
                results[index] = .success(result)
                if !result.duplicate {
                    templates[index] = MessageFrameTemplate(MessageRecord(
                        id: result.messageId, from: send.sender, to: recipients, text: send.request.text,
                        headersJSON: send.request.headersJSON, sentAt: result.sentAt))
                }
            default:
                if !isRetry { retry.append(index) }
                results[index] = .failure(RealtimeFailure(.userNotFound, "no recipient exists", failedRecipients: send.request.to))
            }
        }
        queue.deliverLocally(events) { position in
            templates[eventMessage[position]]?.frame(seq: events[position].seq) ?? []
        }
        queue.report(enqueued)
        for (index, send) in batch.enumerated() where !retry.contains(index) {
            send.completion(results[index] ?? .failure(RealtimeFailure(.internal, "the message was not stored")))
        }
        if !retry.isEmpty { await commit(retry.map { batch[$0] }, isRetry: true) }
    }

    /// Messages between `userId` and `peer` (sent by either to the other), newest first, older
    /// than the message `before` when given.
    public func history(userId: String, with peer: String, before: String?, limit: Int) async throws(RealtimeFailure) -> [MessageRecord] {
        let rows = try await queue.run("""
            SELECT h.id, h.sender, to_json(h.recipients)::text AS recipients, h.body, h.headers, h.sent_at FROM (
                (SELECT * FROM rt_messages WHERE sender = $1 AND $2 = ANY (recipients)
                    AND ($3::uuid IS NULL OR id < $3::uuid) ORDER BY sender, id DESC LIMIT $4)
                UNION
                (SELECT * FROM rt_messages WHERE sender = $2 AND $1 = ANY (recipients)
                    AND ($3::uuid IS NULL OR id < $3::uuid) ORDER BY sender, id DESC LIMIT $4)
            ) h ORDER BY h.id DESC LIMIT $4
            """, [.text(userId), .text(peer), before.map { .text($0) } ?? .null, .int(limit)])
        return rows.compactMap { row in
            guard let id = row["id"].string, let sender = row["sender"].string, let recipientsJSON = row["recipients"].string,
                  case .array(let list)? = try? JSONParser().parse(recipientsJSON), let text = row["body"].string,
                  let sentAt = row["sent_at"].timestampMilliseconds else { return nil }
            return MessageRecord(id: id, from: sender, to: list.compactMap(\.string), text: text,
                                 headersJSON: row["headers"].string ?? "{}", sentAt: sentAt)
        }
    }
}
