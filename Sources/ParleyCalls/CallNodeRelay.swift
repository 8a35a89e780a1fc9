import ParleyJSON
import ParleyNet
import Synchronization

/// Call traffic between nodes, on this node's side: cross-node sends in order (one at a time,
/// so their NOTIFYs commit, and arrive, in the order they were made), frames forwarded to a
/// call's owner node waiting for its reply, and the owner nodes of calls that devices connected
/// here take part in (told when those devices disconnect or come back).
final class CallNodeRelay: Sendable {
    typealias Send = @Sendable () async -> Void

    /// Most sends waiting; more are dropped (a forwarded frame then gets `unavailable`).
    let maxQueued: Int
    /// Most forwarded frames waiting for their reply.
    let maxPending: Int
    /// How long a forwarded frame waits for the owner node's reply.
    let replyTimeout: Duration
    /// Most devices remembered as parties of calls owned elsewhere.
    let maxRemoteParties: Int

    private struct State {
        var queue: [Send] = []
        var head = 0
        var draining = false
        var pending: [String: CallService.Respond] = [:]
        var nextRequest: UInt64 = 0
        var remoteParties: [CallDevice: Set<String>] = [:]
    }

    private let state = Mutex(State())

    init(maxQueued: Int = 4096, maxPending: Int = 1024, replyTimeout: Duration = .seconds(5), maxRemoteParties: Int = 16384) {
        self.maxQueued = maxQueued
        self.maxPending = maxPending
        self.replyTimeout = replyTimeout
        self.maxRemoteParties = maxRemoteParties
    }

    /// Queues `send` after the sends queued before; false when the queue is full.
    @discardableResult
    func enqueue(_ send: @escaping Send) -> Bool {
        let start = state.withLock { state -> Bool? in
            guard state.queue.count - state.head < maxQueued else { return nil }
            state.queue.append(send)
            guard !state.draining else { return false }
            state.draining = true
            return true
        }
        guard let start else { return false }
        if start {
            Task { await self.drain() }
        }
        return true
    }

    private func drain() async {
        while let send = next() { await send() }
    }

    private func next() -> Send? {
        state.withLock { state in
            guard state.head < state.queue.count else {
                state.queue = []
                state.head = 0
                state.draining = false
                return nil
            }
            let send = state.queue[state.head]
            state.head += 1
            if state.head >= 256, state.head * 2 >= state.queue.count {
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            return send
        }
    }

    /// Registers a frame waiting for its owner's reply; its id, or nil when too many wait.
    /// `respond` gets `unavailable` if no reply comes within `replyTimeout` (timed on `loop`;
    /// any thread may call this).
    func waitForReply(_ respond: @escaping CallService.Respond, on loop: EventLoop) -> String? {
        let id = state.withLock { state -> String? in
            guard state.pending.count < maxPending else { return nil }
            state.nextRequest += 1
            let id = String(state.nextRequest)
            state.pending[id] = respond
            return id
        }
        guard let id else { return nil }
        let timeout = replyTimeout
        loop.execute { [self] in
            loop.schedule(after: timeout) { [self] in complete(id, .failure(.unavailable)) }
        }
        return id
    }

    /// Answers a waiting frame (once; later answers for the same id are ignored). Returns
    /// whether it was still waiting.
    @discardableResult
    func complete(_ id: String, _ result: Result<JSONObject, CallError>) -> Bool {
        guard let respond = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return false }
        respond(result)
        return true
    }

    /// Frames waiting for a reply.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Remembers that `device` (connected here) takes part in a call owned by `node`.
    func addRemoteParty(_ device: CallDevice, node: String) {
        state.withLock { state in
            if state.remoteParties[device] == nil, state.remoteParties.count >= maxRemoteParties {
                state.remoteParties.removeAll(keepingCapacity: true)
            }
            state.remoteParties[device, default: []].insert(node)
        }
    }

    /// The owner nodes of calls `device` took part in from here.
    func ownerNodes(of device: CallDevice) -> Set<String> {
        state.withLock { $0.remoteParties[device] ?? [] }
    }
}
