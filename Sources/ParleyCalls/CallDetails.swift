/// A call's timeline and outcome: stored, returned in `call.ended` and by `GET /v1/calls`.
///
/// Times are milliseconds since the Unix epoch; durations are milliseconds.
public struct CallDetails: Sendable, Equatable {
    public var startedAt: Int64
    public var progressedAt: Int64?
    public var rungAt: Int64?
    public var answeredAt: Int64?
    public var establishedAt: Int64?
    public var endedAt: Int64?
    public var endCause: CallEndCause?
    /// Set with `endCause == .failure` (e.g. `user_not_found`).
    public var error: String?
    public var video: Bool

    public init(startedAt: Int64, video: Bool) {
        self.startedAt = startedAt
        self.video = video
    }

    /// Talk time: from media up (or the answer, if no side reported media up) to the end; 0
    /// for a call never answered, nil while the call lasts.
    public var duration: Int64? {
        guard let endedAt else { return nil }
        guard let from = establishedAt ?? answeredAt else { return 0 }
        return max(0, endedAt - from)
    }

    /// Invite to first routing (to a live device or a push queue).
    public var setupDuration: Int64? {
        progressedAt.map { max(0, $0 - startedAt) }
    }

    /// Routing to the first device ringing (includes a push wake-up).
    public var notifyingDuration: Int64? {
        guard let progressedAt, let rungAt else { return nil }
        return max(0, rungAt - progressedAt)
    }

    /// First ringing to the answer, or to the end when unanswered.
    public var ringingDuration: Int64? {
        guard let rungAt, let until = answeredAt ?? endedAt else { return nil }
        return max(0, until - rungAt)
    }
}
