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
    public private(set) var state: ParleyStoredState

    public init(_ state: ParleyStoredState = ParleyStoredState()) {
        self.state = state
    }

    public func load() async throws(ParleyError) -> ParleyStoredState { state }

    public func appendOutbox(_ entries: [OutboxEntry]) async throws(ParleyError) {
        state.outbox.append(contentsOf: entries)
    }

    public func removeOutbox(_ clientMessageIds: [String]) async throws(ParleyError) {
        let gone = Set(clientMessageIds)
        state.outbox.removeAll { gone.contains($0.clientMessageId) }
    }

    public func saveCursor(_ cursor: CursorRecord) async throws(ParleyError) {
        state.cursor = cursor
    }
}
