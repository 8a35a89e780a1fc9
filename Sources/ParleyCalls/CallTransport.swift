import ParleyJSON

/// What the call service needs from the realtime layer: live delivery to the devices connected
/// to this node, the list of a user's devices, and the durable per-device queues (for devices
/// that are offline or connected to another node). Implemented over ParleyRealtime by
/// `RealtimeCallTransport`; every method may be called from any thread.
public protocol CallTransport: Sendable {
    /// Sends `event` to the device's live connection on this node; false when the device is
    /// not connected here (nothing is queued).
    @discardableResult
    func send(_ event: JSONObject, to device: CallDevice) -> Bool

    /// Sends `event` to every live connection of `userId` on this node except the device
    /// `except`; returns how many got it.
    @discardableResult
    func sendToConnectedDevices(_ event: JSONObject, of userId: String, except: String?) -> Int

    /// Whether the device has a live connection on this node.
    func isConnected(_ device: CallDevice) -> Bool

    /// Every device `userId` has (connected or not).
    func devices(of userId: String) async throws -> [String]

    /// The opaque label other users see for a device (`call.answered`, call history): stable
    /// for the device, different for the same device id of another user, and not its id.
    func label(of device: CallDevice) -> String

    /// Whether `caller` is known to have reached `callee` (a message or a call) already; when
    /// not, the invite's statement records it (`CallStore.insert(_:recordContact:)`).
    func knowsContact(from caller: String, to callee: String) -> Bool

    /// A statement recorded that `caller` reached `callee`.
    func contactRecorded(from caller: String, to callee: String)

    /// Queues `event` durably for the given devices of `userId`, to be delivered until
    /// `expiresAt` (Unix ms): a device connected to some node gets it at once, the others when
    /// they connect (a push job is created for them). Returns how many devices it was queued for.
    func enqueue(_ event: JSONObject, forDevicesOf userId: String, only deviceIds: [String], expiresAt: Int64) async throws -> Int

    /// This node's id (where `CallStore` rows say a call lives).
    var nodeId: String { get }

    /// Sends `event` to the device's live connection on another node (unqueued); false when
    /// it is not connected to another node.
    func relay(_ event: JSONObject, to device: CallDevice) async throws -> Bool

    /// Sends `message` to the call service of the node `node`
    /// (`CallService.received(fromNode:)`); false when it cannot be carried (too long).
    func send(_ message: JSONObject, toNode node: String) async throws -> Bool
}

extension CallTransport {
    /// Without a contact directory: nothing to record.
    public func knowsContact(from caller: String, to callee: String) -> Bool { true }
    public func contactRecorded(from caller: String, to callee: String) {}

    /// A transport of one node: no other node to reach.
    public var nodeId: String { "" }
    public func relay(_ event: JSONObject, to device: CallDevice) async throws -> Bool { false }
    public func send(_ message: JSONObject, toNode node: String) async throws -> Bool { false }
}
