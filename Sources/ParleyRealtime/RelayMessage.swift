/// A message from one node to another that may be longer than one NOTIFY payload (8000 bytes):
/// split into `ClusterMessage.chunk` lines sent in one statement (so one transaction, delivered
/// together), and put back together by `RelayAssembler` on the receiving node.
///
/// Bodies: `d <user> <device> <json>` (a frame for a device connected to the receiving node,
/// unqueued) and `h <prefix> <text>` (for the frame handler registered for `prefix`).
enum RelayMessage {
    /// Most bytes of body in one chunk (the line adds at most ~40 more).
    static let chunkBytes = 7000
    /// Most chunks of one message (a bound on a relayed message: ~450 KB).
    static let maxChunks = 64

    /// The NOTIFY payloads carrying `body`, or nil when it is too long.
    static func payloads(_ body: String, id: String) -> [String]? {
        var parts: [String] = []
        var current = String.UnicodeScalarView()
        var bytes = 0
        for scalar in body.unicodeScalars {
            let length = UTF8.width(scalar)
            if bytes + length > chunkBytes {
                parts.append(String(current))
                current = String.UnicodeScalarView()
                bytes = 0
            }
            current.append(scalar)
            bytes += length
        }
        parts.append(String(current))
        guard parts.count <= maxChunks else { return nil }
        return parts.enumerated().map { ClusterMessage.chunk(id: id, index: $0.offset, count: parts.count, data: $0.element).line }
    }

    /// A fresh message id.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let value: UInt64 = generator.next()
        return String(value, radix: 16)
    }
}

/// Reassembles relayed messages from their chunks; bounded (the oldest partial message is
/// dropped past `maxPending`). Owned by the cluster's listener loop.
struct RelayAssembler {
    let maxPending: Int
    private var partial: [String: [String?]] = [:]
    private var order: [String] = []

    init(maxPending: Int = 64) {
        self.maxPending = maxPending
    }

    /// Messages being put back together.
    var pendingCount: Int { partial.count }

    /// Adds a chunk; returns the whole body once every chunk arrived.
    mutating func add(id: String, index: Int, count: Int, data: String) -> String? {
        guard count >= 1, count <= RelayMessage.maxChunks, index >= 0, index < count else { return nil }
        if count == 1 { return data }
        var parts = partial[id] ?? {
            order.append(id)
            return [String?](repeating: nil, count: count)
        }()
        guard parts.count == count else { return nil }
        parts[index] = data
        if parts.allSatisfy({ $0 != nil }) {
            partial[id] = nil
            order.removeAll { $0 == id }
            return parts.compactMap { $0 }.joined()
        }
        partial[id] = parts
        while order.count > maxPending {
            partial[order.removeFirst()] = nil
        }
        return nil
    }
}
