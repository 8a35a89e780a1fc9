import ParleyNet
import Synchronization

/// A device of a user; `deviceId` is scoped to `userId`.
public struct DeviceKey: Hashable, Sendable, CustomStringConvertible {
    public var userId: String
    public var deviceId: String

    public init(userId: String, deviceId: String) {
        self.userId = userId
        self.deviceId = deviceId
    }

    public var description: String { "\(userId)/\(deviceId)" }
}

/// The open sessions of this node by user and device, presence subscribers, and per-user send
/// rate limits. Thread-safe (sharded mutexes); connections live on their own loops, so callers
/// hop there (`connection.loop.execute`) before touching them.
public final class ConnectionRegistry: Sendable {
    private struct UserEntry {
        var devices: [(deviceId: String, connection: RealtimeConnection)] = []
        var subscribers: [RealtimeConnection] = []
        var tokens: Double = 0
        var tokensAt: UInt64 = 0
        var isEmpty: Bool { devices.isEmpty && subscribers.isEmpty }
    }

    private final class Shard: Sendable {
        let users = Mutex<[String: UserEntry]>([:])
    }

    private let shards: [Shard]
    private let connectionCount = Atomic<Int>(0)

    public init(shardCount: Int = 16) {
        shards = (0..<max(1, shardCount)).map { _ in Shard() }
    }

    private func shard(_ userId: String) -> Shard {
        var hasher = Hasher()
        hasher.combine(userId)
        return shards[Int(UInt(bitPattern: hasher.finalize()) % UInt(shards.count))]
    }

    /// Authenticated connections on this node.
    public var count: Int { connectionCount.load(ordering: .relaxed) }

    // MARK: Devices

    /// The outcome of `register`.
    public struct Registration {
        /// The connection of the same device that was replaced (close it).
        public var replaced: RealtimeConnection?
        /// The user had no connection on this node before.
        public var cameOnline: Bool
        /// Presence subscribers of the user (to tell when `cameOnline`).
        public var subscribers: [RealtimeConnection]
    }

    /// Makes `connection` the device's connection on this node.
    public func register(_ connection: RealtimeConnection, as key: DeviceKey) -> Registration {
        shard(key.userId).users.withLock { users in
            var entry = users[key.userId] ?? UserEntry()
            let cameOnline = entry.devices.isEmpty
            var replaced: RealtimeConnection?
            if let index = entry.devices.firstIndex(where: { $0.deviceId == key.deviceId }) {
                replaced = entry.devices[index].connection
                entry.devices[index].connection = connection
            } else {
                entry.devices.append((key.deviceId, connection))
                connectionCount.add(1, ordering: .relaxed)
            }
            users[key.userId] = entry
            return Registration(replaced: replaced, cameOnline: cameOnline, subscribers: cameOnline ? entry.subscribers : [])
        }
    }

    /// Removes `connection` if it is still the device's connection. Returns the user's presence
    /// subscribers when this was the user's last connection on this node, else nil.
    @discardableResult
    public func unregister(_ connection: RealtimeConnection, as key: DeviceKey) -> [RealtimeConnection]? {
        shard(key.userId).users.withLock { users in
            guard var entry = users[key.userId],
                  let index = entry.devices.firstIndex(where: { $0.deviceId == key.deviceId && $0.connection === connection })
            else { return nil }
            entry.devices.remove(at: index)
            connectionCount.subtract(1, ordering: .relaxed)
            let wentOffline = entry.devices.isEmpty
            let subscribers = entry.subscribers
            users[key.userId] = entry.isEmpty ? nil : entry
            return wentOffline ? subscribers : nil
        }
    }

    /// The device's connection on this node.
    public func connection(for key: DeviceKey) -> RealtimeConnection? {
        shard(key.userId).users.withLock { users in
            users[key.userId]?.devices.first(where: { $0.deviceId == key.deviceId })?.connection
        }
    }

    /// The connections of several devices (nil where not connected here), in order.
    public func connections(for keys: [DeviceKey]) -> [RealtimeConnection?] {
        keys.map { connection(for: $0) }
    }

    /// Every connection of a user on this node.
    public func connections(ofUser userId: String) -> [RealtimeConnection] {
        shard(userId).users.withLock { users in users[userId]?.devices.map(\.connection) ?? [] }
    }

    /// Whether the user has a connection on this node.
    public func isOnline(_ userId: String) -> Bool {
        shard(userId).users.withLock { users in !(users[userId]?.devices.isEmpty ?? true) }
    }

    /// Every connection on this node (for shutdown and resynchronisation).
    public func allConnections() -> [RealtimeConnection] {
        var result: [RealtimeConnection] = []
        for shard in shards {
            shard.users.withLock { users in
                for entry in users.values { result.append(contentsOf: entry.devices.map(\.connection)) }
            }
        }
        return result
    }

    // MARK: Presence

    /// Adds `subscriber` to the users' subscriber lists; returns which of them are online here.
    public func subscribe(_ subscriber: RealtimeConnection, to userIds: [String]) -> [Bool] {
        userIds.map { userId in
            shard(userId).users.withLock { users in
                var entry = users[userId] ?? UserEntry()
                if !entry.subscribers.contains(where: { $0 === subscriber }) { entry.subscribers.append(subscriber) }
                users[userId] = entry
                return !entry.devices.isEmpty
            }
        }
    }

    /// Removes `subscriber` from the users' subscriber lists.
    public func unsubscribe(_ subscriber: RealtimeConnection, from userIds: [String]) {
        for userId in userIds {
            shard(userId).users.withLock { users in
                guard var entry = users[userId] else { return }
                entry.subscribers.removeAll { $0 === subscriber }
                users[userId] = entry.isEmpty ? nil : entry
            }
        }
    }

    /// The user's presence subscribers on this node.
    public func subscribers(of userId: String) -> [RealtimeConnection] {
        shard(userId).users.withLock { users in users[userId]?.subscribers ?? [] }
    }

    // MARK: Rate limit

    /// Takes `count` tokens from the user's bucket (refilled at `rate` per second up to `burst`);
    /// false when there are not enough. Users without a connection here are not limited.
    public func takeSendTokens(_ userId: String, count: Double, rate: Double, burst: Double) -> Bool {
        let now = EventLoop.monotonicNanoseconds()
        return shard(userId).users.withLock { users in
            guard var entry = users[userId], !entry.devices.isEmpty else { return true }
            if entry.tokensAt == 0 {
                entry.tokens = burst
            } else {
                entry.tokens = min(burst, entry.tokens + Double(now &- entry.tokensAt) / 1e9 * rate)
            }
            entry.tokensAt = now
            let allowed = entry.tokens >= count
            if allowed { entry.tokens -= count }
            users[userId] = entry
            return allowed
        }
    }
}
