import ParleyJSON

/// Handles frame types the realtime service does not know itself, by prefix (calls register
/// `call.`). Called on the connection's loop for an open session.
public protocol RealtimeFrameHandler: Sendable {
    /// Handles one frame; the returned fields go into the `ok` reply (sent when the frame had an
    /// `id` or fields are returned). A thrown failure becomes an `error` frame.
    func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey) async throws(RealtimeFailure) -> [(String, JSONValue)]
    /// A session opened (`welcome` sent), on the connection's loop: e.g. a call party's device
    /// is back.
    func connectionOpened(_ connection: RealtimeConnection, device: DeviceKey)
    /// A connection of an open session closed (e.g. to end its calls after a grace period).
    func connectionClosed(_ connection: RealtimeConnection, device: DeviceKey)
    /// A message another node relayed to this handler (`RealtimeService.relay(_:toHandler:onNode:)`);
    /// called on the cluster listener's loop, so it must not block.
    func received(fromNode message: String)
}

extension RealtimeFrameHandler {
    public func connectionOpened(_ connection: RealtimeConnection, device: DeviceKey) {}
    public func connectionClosed(_ connection: RealtimeConnection, device: DeviceKey) {}
    public func received(fromNode message: String) {}
}
