import ParleyJSON
import ParleyRealtime
import ParleyWebSocket

/// `CallTransport` over the realtime service: live frames through the connection registry,
/// durable events through the delivery queue (which also creates push jobs for offline
/// devices and tells other nodes).
public struct RealtimeCallTransport: CallTransport {
    let realtime: RealtimeService

    public init(realtime: RealtimeService) {
        self.realtime = realtime
    }

    public func send(_ event: JSONObject, to device: CallDevice) -> Bool {
        guard let connection = realtime.registry.connection(for: DeviceKey(device)) else { return false }
        var payload: [UInt8] = []
        JSONValue.object(event).serialize(into: &payload)
        connection.send(frame: WebSocketFrameEncoder.encode(opcode: .text, payload: payload))
        return true
    }

    public func isConnected(_ device: CallDevice) -> Bool {
        realtime.registry.connection(for: DeviceKey(device)) != nil
    }

    public func enqueue(_ event: JSONObject, forDevicesOf userId: String, excluding: String?, expiresAt: Int64) async throws -> Int {
        try await realtime.queue.enqueue(event: event, toDevicesOf: [userId], excluding: excluding.map { DeviceKey(userId: userId, deviceId: $0) },
                                         toUsersWithoutDevices: false, expiresAt: expiresAt).count
    }

    public func enqueue(_ event: JSONObject, for device: CallDevice, expiresAt: Int64) async throws {
        try await realtime.queue.enqueue(event: event, toDevicesOf: [device.userId], onlyDevice: DeviceKey(device),
                                         toUsersWithoutDevices: false, expiresAt: expiresAt)
    }
}

extension DeviceKey {
    init(_ device: CallDevice) {
        self.init(userId: device.userId, deviceId: device.deviceId)
    }
}

extension CallDevice {
    init(_ key: DeviceKey) {
        self.init(userId: key.userId, deviceId: key.deviceId)
    }
}
