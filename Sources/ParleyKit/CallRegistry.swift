/// The live calls of a client by call id and by the `UUID` CallKit and LiveCommunicationKit
/// use (the same UUID: a Parley call id is one). Readable from any thread, e.g. in a
/// `CXProviderDelegate` callback that only has the action's UUID.
public final class CallRegistry: Sendable {
    private let state = ParleyLock<(live: [String: Call], ended: RecentKeys)>(([:], RecentKeys(capacity: 256)))

    /// The live call with `callId` (any case).
    public func call(id callId: String) -> Call? {
        state.withLock { $0.live[callId.lowercased()] }
    }

    /// The live call CallKit knows by `uuid`.
    public func call(uuid: ParleyUUID) -> Call? {
        call(id: uuid.uuidString)
    }

    /// Every live call.
    public var liveCalls: [Call] {
        state.withLock { Array($0.live.values) }
    }

    /// Adds `call` unless one with its id is live or recently ended; returns the registered one
    /// (nil when the id ended recently: a late replay must not ring again).
    func register(_ call: Call) -> Call? {
        state.withLock { state in
            let key = call.callId.lowercased()
            if let existing = state.live[key] { return existing }
            if state.ended.contains(key) { return nil }
            state.live[key] = call
            return call
        }
    }

    /// Whether the call with `callId` ended recently.
    func hasEnded(_ callId: String) -> Bool {
        state.withLock { $0.ended.contains(callId.lowercased()) }
    }

    /// Moves an ended call out of the live set.
    func ended(_ call: Call) {
        state.withLock { state in
            let key = call.callId.lowercased()
            if state.live[key] === call { state.live[key] = nil }
            state.ended.insert(key)
        }
    }
}
