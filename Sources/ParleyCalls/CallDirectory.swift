import Synchronization

/// Which loop owns each live call, how many calls each user has, and which calls each party
/// device is in. Shared by all loops (mutex-protected); the calls themselves live on their
/// owner loop.
final class CallDirectory: Sendable {
    struct Entry: Sendable {
        /// Index of the owning event loop.
        var loop: Int
        var caller: CallDevice
        var calleeId: String
        /// Whether the call holds one of the callee's concurrent-call slots.
        var calleeCounted: Bool
        var answerer: CallDevice?
    }

    enum Reservation: Equatable {
        case reserved
        case exists
        case tooManyCalls
    }

    private struct State {
        var calls: [String: Entry] = [:]
        var active: [String: Int] = [:]
        var byDevice: [CallDevice: Set<String>] = [:]
        /// Recently ended calls (lowercased ids), oldest first, bounded.
        var ended: Set<String> = []
        var endedOrder: [String] = []
        var endedHead = 0
    }

    private let state = Mutex(State())
    /// Recently ended call ids remembered (to answer `call_ended` without the database).
    let endedCapacity: Int

    init(endedCapacity: Int = 4096) {
        self.endedCapacity = endedCapacity
    }

    static func key(_ callId: String) -> String { callId.lowercased() }

    /// Registers a new call owned by `loop` if the id is free and the caller has a free slot.
    func reserve(callId: String, caller: CallDevice, calleeId: String, loop: Int, maxCallsPerUser: Int) -> Reservation {
        let key = Self.key(callId)
        return state.withLock { state in
            if state.calls[key] != nil || state.ended.contains(key) { return .exists }
            guard state.active[caller.userId, default: 0] < maxCallsPerUser else { return .tooManyCalls }
            state.calls[key] = Entry(loop: loop, caller: caller, calleeId: calleeId, calleeCounted: false, answerer: nil)
            state.active[caller.userId, default: 0] += 1
            state.byDevice[caller, default: []].insert(key)
            return .reserved
        }
    }

    /// Takes one of the callee's slots; false when the callee is at the limit (busy).
    func claimCallee(callId: String, maxCallsPerUser: Int) -> Bool {
        let key = Self.key(callId)
        return state.withLock { state in
            guard var entry = state.calls[key] else { return false }
            guard state.active[entry.calleeId, default: 0] < maxCallsPerUser else { return false }
            entry.calleeCounted = true
            state.calls[key] = entry
            state.active[entry.calleeId, default: 0] += 1
            return true
        }
    }

    /// Records the answering device (a party from now on).
    func setAnswerer(callId: String, device: CallDevice) {
        let key = Self.key(callId)
        state.withLock { state in
            guard var entry = state.calls[key] else { return }
            entry.answerer = device
            state.calls[key] = entry
            state.byDevice[device, default: []].insert(key)
        }
    }

    /// Forgets a call and frees its slots. With `ended`, its id is remembered as ended.
    func release(callId: String, ended: Bool) {
        let key = Self.key(callId)
        state.withLock { state in
            guard let entry = state.calls.removeValue(forKey: key) else { return }
            Self.decrement(&state.active, entry.caller.userId)
            if entry.calleeCounted { Self.decrement(&state.active, entry.calleeId) }
            Self.remove(&state.byDevice, entry.caller, key)
            if let answerer = entry.answerer { Self.remove(&state.byDevice, answerer, key) }
            guard ended, endedCapacity > 0 else { return }
            if state.endedOrder.count < endedCapacity {
                state.endedOrder.append(key)
            } else {
                state.ended.remove(state.endedOrder[state.endedHead])
                state.endedOrder[state.endedHead] = key
                state.endedHead = (state.endedHead + 1) % endedCapacity
            }
            state.ended.insert(key)
        }
    }

    /// The owner loop of a live call.
    func owner(of callId: String) -> Int? {
        state.withLock { $0.calls[Self.key(callId)]?.loop }
    }

    /// Whether the call ended recently (on this node).
    func recentlyEnded(_ callId: String) -> Bool {
        state.withLock { $0.ended.contains(Self.key(callId)) }
    }

    /// Live calls in which `device` is the caller's device or the answering device.
    func calls(of device: CallDevice) -> [(callId: String, loop: Int)] {
        state.withLock { state in
            (state.byDevice[device] ?? []).compactMap { key in state.calls[key].map { (key, $0.loop) } }
        }
    }

    /// Live calls `userId` takes part in (as caller or callee).
    func activeCalls(of userId: String) -> Int {
        state.withLock { $0.active[userId] ?? 0 }
    }

    /// Live calls on this node.
    var count: Int { state.withLock { $0.calls.count } }

    private static func decrement(_ counts: inout [String: Int], _ user: String) {
        guard let value = counts[user] else { return }
        counts[user] = value > 1 ? value - 1 : nil
    }

    private static func remove(_ index: inout [CallDevice: Set<String>], _ device: CallDevice, _ key: String) {
        guard var set = index[device] else { return }
        set.remove(key)
        index[device] = set.isEmpty ? nil : set
    }
}
