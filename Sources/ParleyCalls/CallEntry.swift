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
    /// The callee's devices, read when the call was stored (nil until then).
    var calleeDevices: [String]?
    /// The expiry `call.incoming` was offered with (nil before the offer).
    var offerExpiresAt: Int64?
    /// Whether the call's row is written yet (writes wait for it), or belongs to another call.
    var row: Row = .stored
    /// Whether the call holds one of the callee's concurrent-call slots (else it ends busy).
    let calleeSlot: Bool
    /// Event-loop timers of the armed call timers.
    var timers: [CallTimer: TimerID] = [:]
    /// Callee connections on this node that got `call.incoming` live.
    var liveOffered: Int
    /// Set when a review refused the invite: the call ends with it instead of being offered.
    var refusal: CallRefusal?
    /// Callee devices `call.incoming` was queued for (offline, or on another node).
    var queuedOffered: Set<String> = []
    /// The delayed rewrite of the row after the answer (see `CallService.answerRecordDelay`).
    var answerRecordTimer: TimerID?
    var answerRecorded = false
    /// A record write is in flight; `dirty` asks for one more when it finishes.
    var writing = false
    var dirty = false
    /// Events for every callee device, queued one after the other so they commit in order
    /// (an `call.ended` never lands before the `call.incoming` it ends).
    var calleeEvents: [CalleeEvent] = []
    var calleeEventsDraining = false

    enum Row {
        /// The insert is in flight: writes wait for it (`dirty`).
        case storing
        case stored
        /// The insert found the id taken, or failed: this call writes nothing.
        case notOurs
    }

    struct CalleeEvent {
        var frame: JSONObject
        var devices: [String]
        var expiresAt: Int64
        /// Told how many devices it was queued for, or that queueing failed.
        var completion: ((Result<Int, any Error>) -> Void)?
    }

    init(loop: EventLoop, machine: CallStateMachine, headers: JSONObject, sdp: String, calleeExists: Bool, calleeDevices: [String]?,
         calleeSlot: Bool, liveOffered: Int) {
        self.loop = loop
        self.machine = machine
        self.headers = headers
        self.sdp = sdp
        self.calleeExists = calleeExists
        self.calleeDevices = calleeDevices
        self.calleeSlot = calleeSlot
        self.liveOffered = liveOffered
    }

    var key: String { CallDirectory.key(machine.callId) }

    var record: CallRecord { CallRecord(machine, headers: headers) }
}

/// The live calls owned by one loop, and the frames held for calls still being stored.
///
/// Thread confinement: owned by `loop`; `calls` and `held` are used only on its thread.
final class CallLoop: @unchecked Sendable {
    /// A device frame for a call whose invite is still being stored.
    struct HeldFrame {
        var event: CallEvent
        var device: CallDevice
        var respond: CallService.Respond
    }

    /// Frames held per call being stored (a callee that answers at once waits for the insert).
    static let maxHeldFrames = 16

    let loop: EventLoop
    private var calls: [String: CallEntry] = [:]
    private var held: [String: [HeldFrame]] = [:]

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

    /// Marks a call as being stored: its frames are held until `endStoring`.
    func beginStoring(_ key: String) {
        loop.preconditionInEventLoop()
        held[key] = []
    }

    /// Holds a frame for a call being stored; false when the call is not being stored or too
    /// many frames wait already.
    func hold(_ frame: HeldFrame, for key: String) -> Bool {
        loop.preconditionInEventLoop()
        guard var frames = held[key], frames.count < Self.maxHeldFrames else { return false }
        frames.append(frame)
        held[key] = frames
        return true
    }

    /// Whether the call is being stored.
    func isStoring(_ key: String) -> Bool {
        loop.preconditionInEventLoop()
        return held[key] != nil
    }

    /// The call is stored (or refused): returns the frames held for it.
    func endStoring(_ key: String) -> [HeldFrame] {
        loop.preconditionInEventLoop()
        return held.removeValue(forKey: key) ?? []
    }
}
