import ParleyJSON
import ParleyRealtime
import ParleyWebSocket

/// `CallTransport` over the realtime service: live frames through the connection registry, the
/// user's devices, labels and contacts from the service, durable events through the delivery
/// queue (which also creates push jobs for offline devices and tells other nodes).
public struct RealtimeCallTransport: CallTransport {
    let realtime: RealtimeService

    public init(realtime: RealtimeService) {
        self.realtime = realtime
    }

    public func send(_ event: JSONObject, to device: CallDevice) -> Bool {
        guard let connection = realtime.registry.connection(for: DeviceKey(device)) else { return false }
        connection.send(frame: Self.frame(event))
        return true
    }

    public func sendToConnectedDevices(_ event: JSONObject, of userId: String, except: String?) -> Int {
        var connections = realtime.registry.connections(ofUser: userId)
        if let except, let skipped = realtime.registry.connection(for: DeviceKey(userId: userId, deviceId: except)) {
            connections.removeAll { $0 === skipped }
        }
        guard !connections.isEmpty else { return 0 }
        let frame = Self.frame(event)
        for connection in connections { connection.send(frame: frame) }
        return connections.count
    }

    public var nodeId: String { realtime.nodeID }

    public func relay(_ event: JSONObject, to device: CallDevice) async throws -> Bool {
        try await realtime.relay(event, toDeviceElsewhere: DeviceKey(device))
    }

    public func send(_ message: JSONObject, toNode node: String) async throws -> Bool {
        try await realtime.relay(JSONValue.object(message).serialized(), toHandler: CallFrameHandler.prefix, onNode: node)
    }

    static func frame(_ event: JSONObject) -> [UInt8] {
        var payload: [UInt8] = []
        JSONValue.object(event).serialize(into: &payload)
        return WebSocketFrameEncoder.encode(opcode: .text, payload: payload)
    }

    public func isConnected(_ device: CallDevice) -> Bool {
        realtime.registry.connection(for: DeviceKey(device)) != nil
    }

    public func devices(of userId: String) async throws -> [String] {
        try await realtime.queue.devices(of: userId)
    }

    public func label(of device: CallDevice) -> String {
        realtime.deviceLabel(of: DeviceKey(device))
    }

    public func knowsContact(from caller: String, to callee: String) -> Bool {
        realtime.contacts.isKnown(from: caller, to: callee)
    }

    public func contactRecorded(from caller: String, to callee: String) {
        realtime.contacts.remember([(from: caller, to: callee)])
    }

    public func enqueue(_ event: JSONObject, forDevicesOf userId: String, only deviceIds: [String], expiresAt: Int64) async throws -> Int {
        var queued = 0
        for deviceId in deviceIds {
            queued += try await realtime.queue.enqueue(event: event, toDevicesOf: [userId], onlyDevice: DeviceKey(userId: userId, deviceId: deviceId),
                                                       toUsersWithoutDevices: false, expiresAt: expiresAt).count
        }
        return queued
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
