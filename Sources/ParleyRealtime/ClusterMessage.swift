/// A line of a NOTIFY payload between nodes (channel `parley_rt_<node>` for one node,
/// `parley_rt_presence` for all). Fields are separated by single spaces; user and device ids
/// contain none.
public enum ClusterMessage: Sendable, Equatable {
    /// `e <user> <device> <seq>`: events up to seq were committed for a device connected to the node.
    case event(DeviceKey, seq: Int64)
    /// `r <user> <device> <connection>`: the device connected to another node; close this node's
    /// connection with that id.
    case replace(DeviceKey, connectionID: UInt64)
    /// `t <to> <from> <1|0>`: relay a typing indicator to the user's devices on the node.
    case typing(to: String, from: String, active: Bool)
    /// `p <user> <1|0> <ms> <node>`: the user came online on, or left, a node.
    case presence(userId: String, online: Bool, at: Int64, node: String)
    /// `n <node>`: the node started (after its first heartbeat): the others count more than one
    /// node live at once, before their own next heartbeat would tell them.
    case joined(node: String)
    /// `c <id> <index> <count> <data>`: part `index` (0-based) of `count` of a relayed message
    /// (`RelayMessage`), split to fit NOTIFY's payload limit; `data` may contain spaces.
    case chunk(id: String, index: Int, count: Int, data: String)

    /// The payload line.
    public var line: String {
        switch self {
        case .event(let key, let seq): "e \(key.userId) \(key.deviceId) \(seq)"
        case .replace(let key, let id): "r \(key.userId) \(key.deviceId) \(Int64(bitPattern: id))"
        case .typing(let to, let from, let active): "t \(to) \(from) \(active ? 1 : 0)"
        case .presence(let user, let online, let at, let node): "p \(user) \(online ? 1 : 0) \(at) \(node)"
        case .joined(let node): "n \(node)"
        case .chunk(let id, let index, let count, let data): "c \(id) \(index) \(count) \(data)"
        }
    }

    /// Parses a payload (lines separated by `\n`); malformed lines are skipped.
    public static func parse(_ payload: String) -> [ClusterMessage] {
        payload.split(separator: "\n").compactMap { line in
            if line.hasPrefix("c ") {
                let fields = line.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
                guard fields.count == 5, !fields[1].isEmpty, let index = Int(fields[2]), let count = Int(fields[3]),
                      count > 0, index >= 0, index < count
                else { return nil }
                return .chunk(id: fields[1], index: index, count: count, data: fields[4])
            }
            let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            switch (fields.first, fields.count) {
            case ("e", 4):
                guard let seq = Int64(fields[3]), !fields[1].isEmpty, !fields[2].isEmpty else { return nil }
                return .event(DeviceKey(userId: fields[1], deviceId: fields[2]), seq: seq)
            case ("r", 4):
                guard let id = Int64(fields[3]), !fields[1].isEmpty, !fields[2].isEmpty else { return nil }
                return .replace(DeviceKey(userId: fields[1], deviceId: fields[2]), connectionID: UInt64(bitPattern: id))
            case ("t", 4):
                guard fields[3] == "1" || fields[3] == "0", !fields[1].isEmpty, !fields[2].isEmpty else { return nil }
                return .typing(to: fields[1], from: fields[2], active: fields[3] == "1")
            case ("p", 5):
                guard fields[2] == "1" || fields[2] == "0", let at = Int64(fields[3]), !fields[1].isEmpty else { return nil }
                return .presence(userId: fields[1], online: fields[2] == "1", at: at, node: fields[4])
            case ("n", 2):
                guard !fields[1].isEmpty else { return nil }
                return .joined(node: fields[1])
            default:
                return nil
            }
        }
    }
}
