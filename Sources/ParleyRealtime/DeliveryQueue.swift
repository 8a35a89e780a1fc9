import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// The durable per-device queues in PostgreSQL and the hand-off of committed events to the
/// connections of this node. Calls reuse `enqueue(event:toDevicesOf:…)` for `call.*` events.
///
/// Callable from any task; statements run on the caller's loop when it is an event loop.
public final class DeliveryQueue: Sendable {
    public let database: PostgresClient
    public let registry: ConnectionRegistry
    /// This node's id (routing of NOTIFY hints between nodes).
    public let nodeID: String
    let observer: (any DeliveryObserver)?
    let logger: Logger
    private let disconnects: DisconnectRecorder

    public init(database: PostgresClient, registry: ConnectionRegistry, nodeID: String,
                observer: (any DeliveryObserver)? = nil, logger: Logger = Logger(label: "realtime")) {
        self.database = database
        self.registry = registry
        self.nodeID = nodeID
        self.observer = observer
        self.logger = logger
        disconnects = DisconnectRecorder(database: database, nodeID: nodeID, logger: logger)
    }

    // MARK: Devices

    /// A device's queue state at registration.
    public struct DeviceState: Sendable, Equatable {
        /// The last seq assigned to the device.
        public var lastSeq: Int64
        /// Events up to this seq were removed by retention unacknowledged.
        public var trimmedSeq: Int64
        /// The device was new.
        public var created: Bool
    }

    /// Registers the device (creating it, taking over the user's inbox if it is the first) and
    /// records that it is connected here with `connectionID`.
    public func registerDevice(_ key: DeviceKey, connectionID: UInt64, maxDevices: Int) async throws(RealtimeFailure) -> DeviceState {
        let rows = try await run("SELECT last_seq, trimmed_seq, created FROM rt_register_device($1, $2, $3, $4, $5::integer)", [
            .text(key.userId), .text(key.deviceId), .text(nodeID), .int(Int(truncatingIfNeeded: connectionID)), .int(maxDevices),
        ])
        guard let row = rows.first, let last = row["last_seq"].int, let trimmed = row["trimmed_seq"].int else {
            throw RealtimeFailure(.internal, "device registration returned no row")
        }
        return DeviceState(lastSeq: Int64(last), trimmedSeq: Int64(trimmed), created: row["created"].bool ?? false)
    }

    /// The user's device ids, sorted (connected or not).
    public func devices(of userId: String) async throws(RealtimeFailure) -> [String] {
        let rows = try await run("SELECT device_id FROM rt_devices WHERE user_id = $1 ORDER BY device_id", [.text(userId)])
        return rows.compactMap { $0["device_id"].string }
    }

    /// Records that the device's connection `connectionID` ended (no effect if a newer one took
    /// over). Returns at once: records are written in batches and retried (`DisconnectRecorder`).
    public func deviceDisconnected(_ key: DeviceKey, connectionID: UInt64) {
        disconnects.record(key, connectionID: connectionID)
    }

    /// Disconnect records not yet written.
    public var pendingDisconnects: Int { disconnects.pendingCount }

    // MARK: Reading

    /// Queued events of the device with seq greater than `after`, in seq order, from up to
    /// `limit` queue rows (a receipt batch row gives one event per message id; expired events
    /// are left out). A `message` event whose message is gone has a nil body.
    public func events(for key: DeviceKey, after: Int64, limit: Int) async throws(RealtimeFailure) -> [(seq: Int64, body: QueuedEventBody?)] {
        // A batch row's seq is the last of its range, so `seq > after` finds every row with an event after `after`.
        let rows = try await run("""
            SELECT q.seq, q.kind, q.message_id, q.message_ids, q.actor, q.payload, q.created_at,
                   m.sender, to_json(m.recipients)::text AS recipients, m.body, m.headers, m.sent_at
              FROM rt_queue q LEFT JOIN rt_messages m ON q.kind = 'message' AND m.id = q.message_id
             WHERE q.user_id = $1 AND q.device_id = $2 AND q.seq > $3
               AND (q.expires_at IS NULL OR q.expires_at > now())
             ORDER BY q.seq LIMIT $4
            """, [.text(key.userId), .text(key.deviceId), .int(Int(after)), .int(limit)])
        var result: [(seq: Int64, body: QueuedEventBody?)] = []
        result.reserveCapacity(rows.count)
        for row in rows {
            guard let seq = row["seq"].int.map(Int64.init) else { continue }
            if let ids = row["message_ids"].string.flatMap(SQLArray.parse) {
                let kind = row["kind"].string ?? ""
                let actor = row["actor"].string ?? ""
                let at = row["created_at"].timestampMilliseconds ?? 0
                for (offset, id) in ids.enumerated() {
                    let eventSeq = seq - Int64(ids.count - 1 - offset)
                    guard eventSeq > after else { continue }
                    result.append((eventSeq, .receipt(kind: kind, messageId: id, userId: actor, at: at)))
                }
            } else {
                result.append((seq, Self.body(of: row)))
            }
        }
        return result
    }

    static func body(of row: PostgresRow) -> QueuedEventBody? {
        let kind = row["kind"].string ?? ""
        switch kind {
        case "message":
            guard let id = row["message_id"].string, let sender = row["sender"].string,
                  let recipientsJSON = row["recipients"].string,
                  case .array(let list)? = try? JSONParser().parse(recipientsJSON),
                  let text = row["body"].string, let sentAt = row["sent_at"].timestampMilliseconds
            else { return nil }
            return .message(MessageRecord(id: id, from: sender, to: list.compactMap(\.string), text: text,
                                          headersJSON: row["headers"].string ?? "{}", sentAt: sentAt))
        case "delivered", "read":
            guard let id = row["message_id"].string, let actor = row["actor"].string,
                  let at = row["created_at"].timestampMilliseconds else { return nil }
            return .receipt(kind: kind, messageId: id, userId: actor, at: at)
        default:
            guard let payload = row["payload"].string, case .object(let object)? = try? JSONParser().parse(payload) else { return nil }
            return .custom(object)
        }
    }

    // MARK: Writing

    /// Queues `event` (a JSON object whose `type` is the frame type) for every device of each of
    /// `users` (or only `onlyDevice` of a user, when given), leaving out `excluding`; users with no
    /// device get it in their inbox when `toUsersWithoutDevices`. Events past `expiresAt` (Unix ms)
    /// are never delivered. Connected devices of this node get it at once; other nodes are told.
    @discardableResult
    public func enqueue(event: JSONObject, toDevicesOf users: [String], onlyDevice: DeviceKey? = nil, excluding: DeviceKey? = nil,
                        toUsersWithoutDevices: Bool = true, expiresAt: Int64? = nil) async throws(RealtimeFailure) -> [EnqueuedEvent] {
        guard let type = event["type"]?.string, !type.isEmpty else {
            throw RealtimeFailure(.badRequest, "an event needs a string \"type\"")
        }
        let unique = Array(Set(users)).sorted()
        guard !unique.isEmpty else { return [] }
        let n = unique.count
        let payload = JSONValue.object(event).serialized()
        let expires = expiresAt.map { UTCTime.iso8601(milliseconds: $0) }
        let rows = try await run("SELECT * FROM rt_enqueue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", [
            .text(SQLArray.literal(Array(repeating: 1, count: n))),
            .text(SQLArray.literal(unique)),
            .text(SQLArray.literal(unique.map { $0 == onlyDevice?.userId ? onlyDevice!.deviceId : "" })),
            .text(SQLArray.literal(unique.map { $0 == excluding?.userId ? excluding!.deviceId : "" })),
            .text(SQLArray.literal(Array(repeating: toUsersWithoutDevices, count: n))),
            .text(SQLArray.literal(Array(repeating: type, count: n))),
            .text("{" + Array(repeating: "NULL", count: n).joined(separator: ",") + "}"),
            .text("{" + Array(repeating: "NULL", count: n).joined(separator: ",") + "}"),
            .text(SQLArray.literal(Array(repeating: payload, count: n))),
            .text(expires.map { SQLArray.literal(Array(repeating: $0, count: n)) } ?? "{" + Array(repeating: "NULL", count: n).joined(separator: ",") + "}"),
            .text(nodeID),
        ])
        let deliveries = rows.compactMap(DeliveryRow.init)
        let body = QueuedEventBody.custom(event)
        deliverLocally(deliveries.map { ($0.device, $0.seq) }) { index in ServerFrame.event(QueuedEvent(seq: deliveries[index].seq, body: body)) }
        let enqueued = deliveries.map(\.enqueued)
        report(enqueued)
        return enqueued
    }

    /// Removes acknowledged events (cumulative per device) and queues `delivered` receipts;
    /// returns the receipts, one per message (already handed to this node's connections).
    func acknowledge(_ acks: [(key: DeviceKey, upTo: Int64)]) async throws(RealtimeFailure) -> [DeliveryRow] {
        let rows = try await run("SELECT * FROM rt_ack_batch($1, $2, $3, $4)", [
            .text(SQLArray.literal(acks.map(\.key.userId))),
            .text(SQLArray.literal(acks.map(\.key.deviceId))),
            .text(SQLArray.literal(acks.map(\.upTo))),
            .text(nodeID),
        ])
        let receipts = rows.compactMap(DeliveryRow.init).flatMap(\.events)
        deliverReceipts(receipts)
        return receipts
    }

    /// Queues `read` receipts for the messages sent to `userId`; returns them, one per message.
    func markRead(userId: String, messageIDs: [String]) async throws(RealtimeFailure) -> [DeliveryRow] {
        let rows = try await run("SELECT * FROM rt_mark_read($1, $2, $3)", [
            .text(userId), .text(SQLArray.literal(messageIDs)), .text(nodeID),
        ])
        let receipts = rows.compactMap(DeliveryRow.init).flatMap(\.events)
        deliverReceipts(receipts)
        return receipts
    }

    private func deliverReceipts(_ receipts: [DeliveryRow]) {
        guard !receipts.isEmpty else { return }
        deliverLocally(receipts.map { ($0.device, $0.seq) }) { index in
            let row = receipts[index]
            return ServerFrame.event(QueuedEvent(seq: row.seq, body: .receipt(
                kind: row.kind, messageId: row.messageID ?? "", userId: row.actor ?? "", at: row.createdAt)))
        }
        report(receipts.map(\.enqueued))
    }

    func report(_ events: [EnqueuedEvent]) {
        guard let observer else { return }
        let offline = events.filter { !$0.connected }
        if !offline.isEmpty { observer.enqueuedForOfflineDevices(offline) }
    }

    // MARK: Local hand-off

    /// Hands committed events to the devices' connections on this node (each on its loop, one
    /// hop per loop); `frame(i)` builds the frame of item `i` only for connected devices.
    func deliverLocally(_ items: [(device: DeviceKey, seq: Int64)], frame: (Int) -> [UInt8]) {
        var byLoop: [ObjectIdentifier: (loop: EventLoop, items: [(RealtimeConnection, Int64, [UInt8])])] = [:]
        for (index, item) in items.enumerated() {
            guard let connection = registry.connection(for: item.device) else { continue }
            let id = ObjectIdentifier(connection.loop)
            byLoop[id, default: (connection.loop, [])].items.append((connection, item.seq, frame(index)))
        }
        for (_, group) in byLoop {
            let list = group.items
            if group.loop.inEventLoop {
                for (connection, seq, bytes) in list { connection.deliver(seq: seq, frame: bytes) }
            } else {
                group.loop.execute {
                    for (connection, seq, bytes) in list { connection.deliver(seq: seq, frame: bytes) }
                }
            }
        }
    }

    // MARK: Maintenance

    /// Runs retention once: expired events, events older than `retention` (marking gaps), devices
    /// unused for `retention`, in batches of `batch` rows. Returns the rows removed.
    public func trim(retention: Duration, batch: Int = 10_000) async throws(RealtimeFailure) -> Int {
        var total = 0
        while true {
            let rows = try await run("SELECT rt_trim(make_interval(secs => $1), $2::integer) AS removed",
                                     [.int(Int(retention.components.seconds)), .int(batch)])
            let removed = rows.first?["removed"].int ?? 0
            total += removed
            if removed < batch { return total }
        }
    }

    /// Records this node's heartbeat and its device limit (which the database applies to devices
    /// that installations create) and marks devices of dead nodes offline; returns the number of
    /// live nodes.
    func heartbeat(staleAfter: Duration, maxDevices: Int) async throws(RealtimeFailure) -> Int {
        let rows = try await run("SELECT rt_node_heartbeat($1, make_interval(secs => $2), $3::integer) AS nodes",
                                 [.text(nodeID), .int(Int(staleAfter.components.seconds)), .int(maxDevices)])
        return rows.first?["nodes"].int ?? 1
    }

    /// Runs a statement, retrying deadlocks and serialization failures (they roll back fully).
    func run(_ sql: String, _ params: [PostgresData]) async throws(RealtimeFailure) -> PostgresRows {
        var attempt = 0
        while true {
            do {
                return try await database.query(sql, params)
            } catch {
                attempt += 1
                if error.isRetryableTransactionFailure && attempt < 5 { continue }
                if case .server(let server) = error, server.sqlState != "PR001" {
                    logger.error("realtime statement failed", [("error", server.description)])
                }
                throw RealtimeFailure.database(error)
            }
        }
    }
}

/// A row of type `rt_delivery`: one event, or one batch of receipts, queued for one device.
struct DeliveryRow: Sendable {
    var ord: Int
    var device: DeviceKey
    /// The event's seq; for a batch, the last seq of its range.
    var seq: Int64
    var nodeID: String?
    var kind: String
    var messageID: String?
    /// A batch of receipts: one message id per seq, ending at `seq`.
    var messageIDs: [String]?
    var actor: String?
    var createdAt: Int64

    init?(_ row: PostgresRow) {
        guard let user = row["user_id"].string, let device = row["device_id"].string, let seq = row["seq"].int else { return nil }
        ord = row["ord"].int ?? 0
        self.device = DeviceKey(userId: user, deviceId: device)
        self.seq = Int64(seq)
        nodeID = row["node_id"].string
        kind = row["kind"].string ?? ""
        messageID = row["message_id"].string
        messageIDs = row["message_ids"].string.flatMap(SQLArray.parse)
        actor = row["actor"].string
        createdAt = row["created_at"].timestampMilliseconds ?? 0
    }

    /// The events of the row: itself, or one per message id of a batch (consecutive seqs).
    var events: [DeliveryRow] {
        guard let ids = messageIDs else { return [self] }
        return ids.enumerated().map { offset, id in
            var event = self
            event.seq = seq - Int64(ids.count - 1 - offset)
            event.messageID = id
            event.messageIDs = nil
            return event
        }
    }

    var enqueued: EnqueuedEvent {
        EnqueuedEvent(device: device, seq: seq, kind: kind, connected: nodeID != nil)
    }
}
