import ParleyJSON

/// A message waiting in the outbox: its idempotency key and content.
public struct OutboxEntry: Sendable, Equatable {
    /// Generated before the first attempt and kept for every re-send (a UUID).
    public var clientMessageId: String
    public var message: OutgoingMessage

    public init(clientMessageId: String, message: OutgoingMessage) {
        self.clientMessageId = clientMessageId
        self.message = message
    }

    /// The entry as one line of JSON (the file store's record).
    public var json: JSONValue {
        ["clientMessageId": .string(clientMessageId), "to": .array(message.to.map { .string($0) }),
         "text": .string(message.text), "headers": .object(message.headers)]
    }

    public init?(json: JSONValue) {
        guard let id = json["clientMessageId"]?.string, let to = json["to"]?.array?.compactMap(\.string),
              let text = json["text"]?.string else { return nil }
        self.init(clientMessageId: id, message: OutgoingMessage(to: to, text: text, headers: json["headers"]?.object ?? [:]))
    }
}

/// The device's position in its event queue: the highest seq the app processed, and the
/// dedupe keys of the latest events processed (so a replay after a crash is not shown twice).
public struct CursorRecord: Sendable, Equatable {
    public var seq: Int64
    /// Oldest first, at most `ParleyClientConfiguration.dedupeWindow` keys.
    public var recentKeys: [String]

    public init(seq: Int64 = 0, recentKeys: [String] = []) {
        self.seq = seq
        self.recentKeys = recentKeys
    }

    public var json: JSONValue {
        ["seq": .int(seq), "recent": .array(recentKeys.map { .string($0) })]
    }

    public init?(json: JSONValue) {
        guard let seq = json["seq"]?.int else { return nil }
        self.init(seq: seq, recentKeys: json["recent"]?.array?.compactMap(\.string) ?? [])
    }
}

/// What a device keeps across app restarts.
public struct ParleyStoredState: Sendable, Equatable {
    public var cursor: CursorRecord
    /// Unsent messages, oldest first.
    public var outbox: [OutboxEntry]

    public init(cursor: CursorRecord = CursorRecord(), outbox: [OutboxEntry] = []) {
        self.cursor = cursor
        self.outbox = outbox
    }
}

/// Durable storage of one device's cursor and outbox. Each call returns once the change is
/// durable (a crash after it keeps it). The client calls it from one task at a time, in order.
public protocol ParleyStorage: Sendable {
    /// Reads the stored state (empty for a new install).
    func load() async throws(ParleyError) -> ParleyStoredState
    /// Adds entries to the end of the outbox.
    func appendOutbox(_ entries: [OutboxEntry]) async throws(ParleyError)
    /// Removes entries (sent, or refused for good) from the outbox.
    func removeOutbox(_ clientMessageIds: [String]) async throws(ParleyError)
    /// Replaces the cursor.
    func saveCursor(_ cursor: CursorRecord) async throws(ParleyError)
}

/// Storage in memory only (tests, or an app that keeps nothing across launches).
public actor InMemoryStorage: ParleyStorage {
    private var cursor: CursorRecord
    private var outbox: OrderedOutbox

    public init(_ state: ParleyStoredState = ParleyStoredState()) {
        cursor = state.cursor
        outbox = OrderedOutbox(state.outbox)
    }

    public var state: ParleyStoredState { ParleyStoredState(cursor: cursor, outbox: outbox.entries) }

    public func load() async throws(ParleyError) -> ParleyStoredState { state }

    public func appendOutbox(_ entries: [OutboxEntry]) async throws(ParleyError) {
        outbox.append(entries)
    }

    public func removeOutbox(_ clientMessageIds: [String]) async throws(ParleyError) {
        outbox.remove(clientMessageIds)
    }

    public func saveCursor(_ cursor: CursorRecord) async throws(ParleyError) {
        self.cursor = cursor
    }
}

/// Outbox entries in insertion order, removable by id in O(1): what storages keep in memory.
public struct OrderedOutbox: Sendable, Equatable {
    private var byId: [String: (order: Int, entry: OutboxEntry)] = [:]
    private var nextOrder = 0

    public init(_ entries: [OutboxEntry] = []) {
        append(entries)
    }

    public var count: Int { byId.count }

    /// Oldest first.
    public var entries: [OutboxEntry] { byId.values.sorted { $0.order < $1.order }.map(\.entry) }

    public mutating func append(_ entries: [OutboxEntry]) {
        for entry in entries where byId[entry.clientMessageId] == nil {
            byId[entry.clientMessageId] = (nextOrder, entry)
            nextOrder += 1
        }
    }

    public mutating func remove(_ clientMessageIds: [String]) {
        for id in clientMessageIds { byId[id] = nil }
    }

    public static func == (lhs: OrderedOutbox, rhs: OrderedOutbox) -> Bool { lhs.entries == rhs.entries }
}
