/// Where blocking work (disk I/O) runs. The Linux transport supplies one backed by ParleyNet's
/// `BlockingPool`, so file storage never blocks an event loop or a cooperative thread.
public protocol BlockingRunner: Sendable {
    /// Runs `work` where blocking is allowed and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws(ParleyError) -> T) async throws(ParleyError) -> T
}

/// Runs the work in the calling task (for apps that call storage from a thread of their own).
public struct InlineRunner: BlockingRunner {
    public init() {}

    public func run<T: Sendable>(_ work: @escaping @Sendable () throws(ParleyError) -> T) async throws(ParleyError) -> T {
        try work()
    }
}
