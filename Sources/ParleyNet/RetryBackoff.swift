/// Exponential backoff with jitter for retried deliveries (push jobs, mail): attempt n waits
/// base · 2^(n-1), capped at `max`, then a random point in its upper half (so retries of many
/// jobs failed together spread out).
public struct RetryBackoff: Sendable {
    public var base: Duration
    public var max: Duration

    public init(base: Duration, max: Duration) {
        self.base = base
        self.max = max
    }

    /// The delay after failed attempt `attempt` (1-based).
    public func delay<R: RandomNumberGenerator>(afterAttempt attempt: Int, using random: inout R) -> Duration {
        let exponent = Swift.min(Swift.max(attempt - 1, 0), 30)
        let capped = Swift.min(base * (1 << exponent), max)
        let nanos = Swift.max(Int64(0), RetryBackoff.nanoseconds(capped))
        let half = nanos / 2
        return .nanoseconds(half + Int64.random(in: 0...Swift.max(half, nanos - half), using: &random))
    }

    public func delay(afterAttempt attempt: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterAttempt: attempt, using: &generator)
    }

    /// `duration` in nanoseconds (negative stays negative).
    public static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
