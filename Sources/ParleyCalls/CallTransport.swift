import ParleyJSON

/// What the call service needs from the realtime layer: live delivery to connected devices
/// and the durable per-device queues. Implemented over ParleyRealtime by
/// `RealtimeCallTransport`; every method may be called from any thread.
public protocol CallTransport: Sendable {
    /// Sends `event` to the device's live connection on this node; false when the device is
    /// not connected here (nothing is queued).
    @discardableResult
    func send(_ event: JSONObject, to device: CallDevice) -> Bool

    /// Whether the device has a live connection on this node.
    func isConnected(_ device: CallDevice) -> Bool

    /// Queues `event` durably for every device of `userId` except `excluding`, to be delivered
    /// until `expiresAt` (Unix ms): connected devices get it at once, the others when they
    /// connect (a push job is created for them). Returns how many devices it was queued for
    /// (0 for a user with no device).
    func enqueue(_ event: JSONObject, forDevicesOf userId: String, excluding: String?, expiresAt: Int64) async throws -> Int

    /// Queues `event` durably for one device until `expiresAt` (Unix ms).
    func enqueue(_ event: JSONObject, for device: CallDevice, expiresAt: Int64) async throws
}
