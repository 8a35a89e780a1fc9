import Foundation
import ParleyCalls
import ParleyJSON
import ParleyNet
import Synchronization

/// A stand-in for the realtime layer: which devices are connected, what each device received
/// (replies and events in order), and what was queued for whom.
final class InMemoryCallTransport: CallTransport {
    struct Queued: Equatable {
        var event: JSONObject
        var expiresAt: Int64
    }

    private struct State {
        var live: Set<CallDevice> = []
        /// Every device each user has (connected or not).
        var known: [String: [String]] = [:]
        var received: [CallDevice: [JSONObject]] = [:]
        var queued: [CallDevice: [Queued]] = [:]
        var failQueueing = false
        var failDeviceList = false
    }

    private let state = Mutex(State())
    /// This transport's node (tests of several nodes), and the nodes it reaches.
    let nodeId: String
    private let peers = Mutex<[String: Peer]>([:])

    struct Peer {
        var transport: InMemoryCallTransport
        var service: CallService
    }

    init(nodeId: String = "") {
        self.nodeId = nodeId
    }

    /// Makes the node `node` (its devices and its call service) reachable from this one.
    func link(_ node: String, transport: InMemoryCallTransport, service: CallService) {
        peers.withLock { $0[node] = Peer(transport: transport, service: service) }
    }

    func connect(_ device: CallDevice) {
        state.withLock { state in
            state.live.insert(device)
            if !(state.known[device.userId] ?? []).contains(device.deviceId) { state.known[device.userId, default: []].append(device.deviceId) }
        }
    }

    func disconnect(_ device: CallDevice) {
        _ = state.withLock { $0.live.remove(device) }
    }

    /// A device the user has but that is not connected.
    func addOfflineDevice(_ device: CallDevice) {
        state.withLock { state in
            if !(state.known[device.userId] ?? []).contains(device.deviceId) { state.known[device.userId, default: []].append(device.deviceId) }
        }
    }

    func setQueueingFails(_ fails: Bool) {
        state.withLock { $0.failQueueing = fails }
    }

    func setDeviceListFails(_ fails: Bool) {
        state.withLock { $0.failDeviceList = fails }
    }

    /// Records a reply as the device would see it.
    func record(_ frame: JSONObject, for device: CallDevice) {
        state.withLock { $0.received[device, default: []].append(frame) }
    }

    func received(_ device: CallDevice) -> [JSONObject] {
        state.withLock { $0.received[device] ?? [] }
    }

    func receivedTypes(_ device: CallDevice) -> [String] {
        received(device).compactMap { $0["type"]?.string }
    }

    func queued(_ device: CallDevice) -> [Queued] {
        state.withLock { $0.queued[device] ?? [] }
    }

    /// Waits until `device` received a frame of `type` (the `n`th one), or gives up.
    func waitFor(_ device: CallDevice, _ type: String, count n: Int = 1, timeout: Duration = .seconds(5)) async -> JSONObject? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let matching = received(device).filter { $0["type"]?.string == type }
            if matching.count >= n { return matching[n - 1] }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    /// Waits until `device` received a frame matching `predicate`.
    func waitFor(_ device: CallDevice, timeout: Duration = .seconds(5), where predicate: (JSONObject) -> Bool) async -> JSONObject? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = received(device).first(where: predicate) { return found }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    func waitForQueued(_ device: CallDevice, _ type: String, timeout: Duration = .seconds(5)) async -> Queued? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = queued(device).first(where: { $0.event["type"]?.string == type }) { return found }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    // MARK: CallTransport

    func send(_ event: JSONObject, to device: CallDevice) -> Bool {
        state.withLock { state in
            guard state.live.contains(device) else { return false }
            state.received[device, default: []].append(event)
            return true
        }
    }

    func sendToConnectedDevices(_ event: JSONObject, of userId: String, except: String?) -> Int {
        state.withLock { state in
            let devices = (state.known[userId] ?? []).filter { $0 != except && state.live.contains(CallDevice(userId: userId, deviceId: $0)) }
            for deviceId in devices { state.received[CallDevice(userId: userId, deviceId: deviceId), default: []].append(event) }
            return devices.count
        }
    }

    func isConnected(_ device: CallDevice) -> Bool {
        state.withLock { $0.live.contains(device) }
    }

    struct QueueFailure: Error {}

    /// To the linked node the device is connected to.
    func relay(_ event: JSONObject, to device: CallDevice) async throws -> Bool {
        let nodes = peers.withLock { Array($0.values) }
        guard let peer = nodes.first(where: { $0.transport.isConnected(device) }) else { return false }
        return peer.transport.send(event, to: device)
    }

    /// Through JSON text, as the realtime relay carries it; a node not linked swallows it (a
    /// stopped node).
    func send(_ message: JSONObject, toNode node: String) async throws -> Bool {
        guard let peer = peers.withLock({ $0[node] }) else { return true }
        guard let parsed = try JSONParser().parse(JSONValue.object(message).serialized()).object else { return false }
        peer.service.received(fromNode: parsed)
        return true
    }

    /// A stand-in for the realtime layer's keyed hash: distinct per user and device.
    func label(of device: CallDevice) -> String {
        "label<\(device.userId)|\(device.deviceId)>"
    }

    func devices(of userId: String) async throws -> [String] {
        try state.withLock { state in
            if state.failDeviceList { throw QueueFailure() }
            return state.known[userId] ?? []
        }
    }

    /// Like the realtime queue: recorded for every given device, and handed at once (with a seq)
    /// to the connected ones.
    func enqueue(_ event: JSONObject, forDevicesOf userId: String, only deviceIds: [String], expiresAt: Int64) async throws -> Int {
        try state.withLock { state in
            if state.failQueueing { throw QueueFailure() }
            let devices = (state.known[userId] ?? []).filter { deviceIds.contains($0) }
            for deviceId in devices {
                let device = CallDevice(userId: userId, deviceId: deviceId)
                state.queued[device, default: []].append(Queued(event: event, expiresAt: expiresAt))
                if state.live.contains(device) {
                    var delivered = event
                    delivered["seq"] = .int(Int64(state.queued[device]!.count))
                    state.received[device, default: []].append(delivered)
                }
            }
            return devices.count
        }
    }
}
