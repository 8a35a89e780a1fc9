/// The state machine's outbox: entries in send order with their status, removable by
/// `clientMessageId`. Every operation is O(1) amortized, so an outbox of thousands (a burst
/// sent faster than the server answers) costs nothing per message.
struct OutboxQueue: Sendable {
    enum Status: Sendable, Equatable {
        case ready
        case inFlight
        case retryAt(Int64)
    }

    struct Slot: Sendable {
        var entry: OutboxEntry
        var status: Status
    }

    /// Slots by position; removed ones are nil until compaction.
    private var storage: [Slot?] = []
    private var head = 0
    private var positions: [String: Int] = [:]
    /// Every slot below this position is in flight or waiting for a retry that is not due.
    private var unsentFrom = 0
    private(set) var count = 0
    /// Slots waiting for a retry.
    private(set) var retrying = 0

    init(_ entries: [OutboxEntry] = []) {
        for entry in entries { append(entry) }
    }

    var entries: [OutboxEntry] { storage[head...].compactMap { $0?.entry } }

    mutating func append(_ entry: OutboxEntry) {
        positions[entry.clientMessageId] = storage.count
        storage.append(Slot(entry: entry, status: .ready))
        count += 1
    }

    /// Removes the entry; nil when it is not here.
    @discardableResult
    mutating func remove(_ clientMessageId: String) -> Slot? {
        guard let position = positions.removeValue(forKey: clientMessageId), let slot = storage[position] else { return nil }
        storage[position] = nil
        count -= 1
        if case .retryAt = slot.status { retrying -= 1 }
        while head < storage.count && storage[head] == nil { head += 1 }
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
            unsentFrom = 0
        } else if head > 1024 && head * 2 > storage.count {
            storage.removeFirst(head)
            for (key, value) in positions { positions[key] = value - head }
            unsentFrom = max(0, unsentFrom - head)
            head = 0
        }
        return slot
    }

    /// Marks an in-flight entry to be sent again at `at`.
    mutating func retry(_ clientMessageId: String, at: Int64) {
        guard let position = positions[clientMessageId], storage[position] != nil else { return }
        storage[position]!.status = .retryAt(at)
        retrying += 1
        unsentFrom = min(unsentFrom, position)
    }

    /// Every entry is ready again (the connection that carried them is gone).
    mutating func resetToReady() {
        for position in head..<storage.count where storage[position] != nil { storage[position]!.status = .ready }
        retrying = 0
        unsentFrom = head
    }

    /// Takes up to `limit` due entries, oldest first, and marks them in flight.
    mutating func takeDue(now: Int64, limit: Int) -> [OutboxEntry] {
        var taken: [OutboxEntry] = []
        var position = max(unsentFrom, head)
        var firstWaiting: Int?
        while position < storage.count && taken.count < limit {
            if let slot = storage[position] {
                switch slot.status {
                case .ready:
                    taken.append(slot.entry)
                    storage[position]!.status = .inFlight
                case .retryAt(let at) where now >= at:
                    taken.append(slot.entry)
                    storage[position]!.status = .inFlight
                    retrying -= 1
                case .retryAt:
                    if firstWaiting == nil { firstWaiting = position }
                case .inFlight:
                    break
                }
            }
            position += 1
        }
        unsentFrom = firstWaiting ?? position
        return taken
    }

    /// The earliest retry time, if any entry waits for one.
    var earliestRetry: Int64? {
        guard retrying > 0 else { return nil }
        var earliest: Int64?
        for position in head..<storage.count {
            if case .retryAt(let at)? = storage[position]?.status { earliest = min(earliest ?? at, at) }
        }
        return earliest
    }
}
