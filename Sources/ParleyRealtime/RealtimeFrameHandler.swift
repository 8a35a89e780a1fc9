import ParleyJSON

/// Handles frame types the realtime service does not know itself, by prefix (calls register
/// `call.`). Called on the connection's loop for an open session.
public protocol RealtimeFrameHandler: Sendable {
    /// Handles one frame; the returned fields go into the `ok` reply (sent when the frame had an
    /// `id` or fields are returned). A thrown failure becomes an `error` frame.
    func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey) async throws(RealtimeFailure) -> [(String, JSONValue)]
    /// Handles one frame and answers through `reply`, exactly once, from any thread. This is
    /// what the connection calls; the default runs the `async` variant in a task on the
    /// connection's loop. A handler that does not need a task implements it to save one per frame.
    func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey,
                reply: @escaping @Sendable (Result<[(String, JSONValue)], RealtimeFailure>) -> Void)
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
    public func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey,
                       reply: @escaping @Sendable (Result<[(String, JSONValue)], RealtimeFailure>) -> Void) {
        Task(executorPreference: connection.loop) {
            do throws(RealtimeFailure) {
                reply(.success(try await handle(type: type, frame: frame, from: connection, device: device)))
            } catch {
                reply(.failure(error))
            }
        }
    }

    public func connectionOpened(_ connection: RealtimeConnection, device: DeviceKey) {}
    public func connectionClosed(_ connection: RealtimeConnection, device: DeviceKey) {}
    public func received(fromNode message: String) {}
}
