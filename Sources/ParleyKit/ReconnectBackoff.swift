/// Exponential reconnect delays with jitter: attempt n waits a random time in the upper half
/// of min(cap, base × 2^n) (docs/realtime-protocol.md, "Client reconnect algorithm").
public struct ReconnectBackoff: Sendable, Equatable {
    /// Delay of the first retry before jitter, in milliseconds.
    public var baseMilliseconds: Int64
    /// Largest delay before jitter, in milliseconds.
    public var capMilliseconds: Int64

    public init(baseMilliseconds: Int64 = 500, capMilliseconds: Int64 = 30_000) {
        self.baseMilliseconds = max(1, baseMilliseconds)
        self.capMilliseconds = max(self.baseMilliseconds, capMilliseconds)
    }

    /// The delay before jitter for retry `attempt` (0 for the first).
    public func ceiling(attempt: Int) -> Int64 {
        var delay = baseMilliseconds
        var step = 0
        while step < attempt && delay < capMilliseconds {
            delay *= 2
            step += 1
        }
        return min(delay, capMilliseconds)
    }

    /// The delay for retry `attempt`, in [ceiling/2, ceiling], drawn from `random`.
    public func delay(attempt: Int, random: inout SplitMix64) -> Int64 {
        let ceiling = ceiling(attempt: attempt)
        let half = ceiling / 2
        return ceiling - half + Int64(random.next() % UInt64(half + 1))
    }
}

/// A small deterministic generator (SplitMix64): seeded from the system in apps, fixed in tests.
public struct SplitMix64: RandomNumberGenerator, Sendable, Equatable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded from the system's random source.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
