import ParleyJSON

/// What the call service needs from the realtime layer: live delivery to connected devices
/// and the durable per-device queues. Implemented over ParleyRealtime's connection registry
/// and delivery queue; every method may be called from any thread.
public protocol CallTransport: Sendable {
    /// Sends `event` to the device's live connection on this node; false when the device is
    /// not connected here (nothing is queued).
    @discardableResult
    func send(_ event: JSONObject, to device: CallDevice) -> Bool

    /// The devices of `userId` connected to this node now.
    func liveDevices(of userId: String) -> [String]

    /// Queues `event` for every known device of `userId` except `except` (durably, creating a
    /// push job for offline devices) to be delivered until `expiresAt` (Unix ms); returns the
    /// devices it was queued for. A user with no device gets nothing queued.
    func enqueue(_ event: JSONObject, forDevicesOf userId: String, except: Set<String>, expiresAt: Int64) async throws -> [String]

    /// Queues `event` for one device until `expiresAt` (Unix ms).
    func enqueue(_ event: JSONObject, for device: CallDevice, expiresAt: Int64) async throws
}
