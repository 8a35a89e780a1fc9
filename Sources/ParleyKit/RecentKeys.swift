/// The dedupe keys of the latest processed events: a bounded ring with a set for lookups.
struct RecentKeys: Sendable, Equatable {
    let capacity: Int
    private var ring: [String] = []
    private var next = 0
    private var members: Set<String> = []

    init(capacity: Int, keys: [String] = []) {
        self.capacity = capacity
        for key in keys.suffix(capacity) { insert(key) }
    }

    func contains(_ key: String) -> Bool { members.contains(key) }

    mutating func insert(_ key: String) {
        guard !members.contains(key) else { return }
        if ring.count < capacity {
            ring.append(key)
        } else {
            members.remove(ring[next])
            ring[next] = key
            next = (next + 1) % capacity
        }
        members.insert(key)
    }

    /// Oldest first.
    var keys: [String] { Array(ring[next...] + ring[..<next]) }
}
