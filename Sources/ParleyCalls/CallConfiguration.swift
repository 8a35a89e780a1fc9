/// Timers, limits and TURN settings of the call service; defaults match `parley serve`'s options.
public struct CallConfiguration: Sendable, Equatable {
    public var timeouts: CallTimeouts
    /// Live calls a user may take part in at once (as caller or callee). An invite past it is
    /// refused (`too_many_calls`); a call to a callee at it ends with `busy`.
    public var maxCallsPerUser: Int
    /// How often the node closes the live calls of nodes that stopped heartbeating (`start`).
    public var nodeSweepInterval: Duration
    public var limits: CallLimits
    /// TURN credentials handed out by `GET /v1/turn`; nil disables TURN (`{}`).
    public var turn: TURNConfiguration?

    public init(timeouts: CallTimeouts = CallTimeouts(), maxCallsPerUser: Int = 1, nodeSweepInterval: Duration = .seconds(60),
                limits: CallLimits = CallLimits(), turn: TURNConfiguration? = nil) {
        self.timeouts = timeouts
        self.maxCallsPerUser = maxCallsPerUser
        self.nodeSweepInterval = nodeSweepInterval
        self.limits = limits
        self.turn = turn
    }
}
