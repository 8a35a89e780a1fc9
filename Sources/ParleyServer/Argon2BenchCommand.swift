import ParleyAccounts
import ParleyNet
import Synchronization

/// `parley bench-argon2` (hidden): argon2id verifications per second on every core, the
/// reference for bench/accounts/login.sh.
public enum Argon2BenchCommand {
    public static func run(_ arguments: [String]) -> Int32 {
        var seconds = 5.0
        var threads = EventLoopGroup.coreCount
        var operations = PasswordHasher.interactiveOperations
        var memory = PasswordHasher.interactiveMemory
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard let value = iterator.next() else { print("parley: \(argument) needs a value"); return 2 }
            switch argument {
            case "--seconds": seconds = Double(value) ?? seconds
            case "--threads": threads = Int(value) ?? threads
            case "--ops": operations = Int(value) ?? operations
            case "--mem": memory = Int(value) ?? memory
            default: print("parley: unknown option \(argument)"); return 2
            }
        }
        let threadCount = max(1, threads)
        let hasher = PasswordHasher(operationsLimit: operations, memoryLimit: memory)
        guard let hash = try? hasher.hashBlocking("benchmark-password") else { return 1 }
        let pool: BlockingPool
        do { pool = try BlockingPool(threads: threadCount) } catch { return 1 }
        defer { pool.shutdown() }
        let count = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        let done = Latch()
        let start = EventLoop.monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        for _ in 0..<threadCount {
            try? pool.submit {
                while EventLoop.monotonicNanoseconds() < deadline {
                    _ = hasher.verifyBlocking("benchmark-password", hash: hash)
                    count.add(1, ordering: .relaxed)
                }
                if finished.add(1, ordering: .acquiringAndReleasing).newValue == threadCount { done.open() }
            }
        }
        done.wait()
        let elapsed = Double(EventLoop.monotonicNanoseconds() - start) / 1e9
        let total = count.load(ordering: .relaxed)
        let rate = Double(total) / elapsed
        print("{\"verifies\":\(total),\"seconds\":\(String(format: elapsed)),\"threads\":\(threadCount),\"ops\":\(operations),\"mem\":\(memory),\"verifies_per_second\":\(String(format: rate))}")
        return 0
    }

    private static func String(format value: Double) -> Swift.String {
        let scaled = (value * 100).rounded() / 100
        return "\(scaled)"
    }
}
