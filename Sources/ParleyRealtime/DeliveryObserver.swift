/// One event queued for one device.
public struct EnqueuedEvent: Sendable, Equatable {
    /// The device (deviceId "" = the user's inbox: the user has no device yet).
    public var device: DeviceKey
    public var seq: Int64
    /// The event type (`message`, `delivered`, `read`, or a custom type such as `call.incoming`).
    public var kind: String
    /// Whether the device was connected to some node when the event committed.
    public var connected: Bool
}

/// Extension point for push notifications: told, after an enqueue committed, about the events
/// queued for devices that were not connected to any node.
///
/// To create push jobs atomically with the events (nothing lost if the node dies right after
/// the commit), replace the SQL function `rt_on_offline_enqueue(rt_delivery[])` instead (see
/// migrations/0004_realtime.sql): it runs inside the enqueueing transaction. This observer is
/// for waking a worker after the commit.
public protocol DeliveryObserver: Sendable {
    func enqueuedForOfflineDevices(_ events: [EnqueuedEvent])
}
