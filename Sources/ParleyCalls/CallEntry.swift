import ParleyJSON
import ParleyNet

/// One live call on its owner loop: the state machine plus what executing its actions needs.
///
/// Thread confinement: owned by `loop`; created, read and changed only on that loop's thread
/// (the service checks with `preconditionInEventLoop`). `@unchecked Sendable` only so tasks
/// pinned to that loop can hold it.
final class CallEntry: @unchecked Sendable {
    let loop: EventLoop
    var machine: CallStateMachine
    let headers: JSONObject
    /// The caller's offer, for `call.incoming`.
    let sdp: String
    let calleeExists: Bool
    /// Event-loop timers of the armed call timers.
    var timers: [CallTimer: TimerID] = [:]
    /// A record write is in flight; `dirty` asks for one more when it finishes.
    var writing = false
    var dirty = false
    /// Events for every callee device, queued one after the other so they commit in order
    /// (an `call.ended` never lands before the `call.incoming` it ends).
    var calleeEvents: [CalleeEvent] = []
    var calleeEventsDraining = false

    struct CalleeEvent {
        var frame: JSONObject
        var excluding: String?
        var expiresAt: Int64
        /// Told how many devices it was queued for, or that queueing failed.
        var completion: ((Result<Int, any Error>) -> Void)?
    }

    init(loop: EventLoop, machine: CallStateMachine, headers: JSONObject, sdp: String, calleeExists: Bool) {
        self.loop = loop
        self.machine = machine
        self.headers = headers
        self.sdp = sdp
        self.calleeExists = calleeExists
    }

    var key: String { CallDirectory.key(machine.callId) }

    var record: CallRecord { CallRecord(machine, headers: headers) }
}

/// The live calls owned by one loop.
///
/// Thread confinement: owned by `loop`; `calls` is used only on its thread.
final class CallLoop: @unchecked Sendable {
    let loop: EventLoop
    private var calls: [String: CallEntry] = [:]

    init(loop: EventLoop) {
        self.loop = loop
    }

    subscript(key: String) -> CallEntry? {
        get {
            loop.preconditionInEventLoop()
            return calls[key]
        }
        set {
            loop.preconditionInEventLoop()
            calls[key] = newValue
        }
    }
}
