import ParleyKit
import ParleyNet

/// Runs ParleyKit's blocking storage work on ParleyNet's `BlockingPool`, never on a loop.
public struct BlockingPoolRunner: BlockingRunner {
    public let pool: BlockingPool

    public init(pool: BlockingPool) {
        self.pool = pool
    }

    public func run<T: Sendable>(_ work: @escaping @Sendable () throws(ParleyError) -> T) async throws(ParleyError) -> T {
        do {
            return try await pool.run { () throws -> T in try work() }
        } catch let error as ParleyError {
            throw error
        } catch {
            throw .storage(operation: "blocking pool: \(error)", errno: 0)
        }
    }
}
