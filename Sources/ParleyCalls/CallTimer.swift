/// The timers a call arms. The executor keeps at most one of each per call.
public enum CallTimer: Sendable, Hashable {
    /// From the invite until a callee device rings: `timeout` when it fires.
    case reach
    /// From the first ringing until an answer: `noAnswer` when it fires.
    case ring
    /// From a party's connection loss (after the answer) until it comes back: `inactive`.
    case grace(CallSide)
}

/// How long a call waits at each stage.
public struct CallTimeouts: Sendable, Equatable {
    /// No callee device rang within this: the call ends with `timeout`.
    public var reach: Duration
    /// Ringing but unanswered for this long: `noAnswer`.
    public var ring: Duration
    /// A party's connection lost after the answer and not back within this: `inactive`.
    public var grace: Duration

    public init(reach: Duration = .seconds(10), ring: Duration = .seconds(45), grace: Duration = .seconds(20)) {
        self.reach = reach
        self.ring = ring
        self.grace = grace
    }

    /// The longest an unanswered call can live: a queued `call.incoming` expires after this.
    public var lifetime: Duration { reach + ring }
}

extension Duration {
    /// Whole milliseconds (rounded down).
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
