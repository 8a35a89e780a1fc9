import Synchronization

/// At most `maxConcurrent` holders at once; one more is refused at once instead of queueing.
///
/// For work whose queue would otherwise grow without bound under a flood (argon2id jobs,
/// `$regex` statements): refusing fast keeps the pool free for everyone else.
public final class AdmissionLimit: Sendable {
    /// How many may hold the limit at once.
    public let maxConcurrent: Int
    private let holders = Atomic<Int>(0)

    public init(maxConcurrent: Int) {
        self.maxConcurrent = max(1, maxConcurrent)
    }

    /// Takes a place if one is free; a true answer must be matched by one `leave()`.
    public func tryEnter() -> Bool {
        guard holders.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue <= maxConcurrent else {
            holders.wrappingSubtract(1, ordering: .acquiringAndReleasing)
            return false
        }
        return true
    }

    /// Gives back a place taken by `tryEnter()`.
    public func leave() {
        holders.wrappingSubtract(1, ordering: .acquiringAndReleasing)
    }

    /// How many hold the limit now.
    public var current: Int { holders.load(ordering: .relaxed) }
}
