#if canImport(Glibc)
import Glibc
#endif
import ParleyAccounts
import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// `parley user …` / `parley session …`: connects like `parley migrate` (same database options),
/// applies pending migrations, then runs `AccountsCLI`.
public enum AccountsCommand {
    /// Database options taken out of the arguments before the rest goes to `AccountsCLI`.
    static let databaseOptions = MigrateCommand.options

    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        var databaseArguments: [String] = []
        var rest: [String] = []
        var iterator = arguments.makeIterator()
        let flags = Set(databaseOptions.map(\.flag))
        while let argument = iterator.next() {
            if flags.contains(argument), let value = iterator.next() {
                databaseArguments += [argument, value]
            } else {
                rest.append(argument)
            }
        }
        if rest.contains("--help") || rest.count < 2 {
            print(AccountsCLI.usage)
            return rest.contains("--help") ? 0 : 2
        }
        let values = try ConfigValues(options: databaseOptions, arguments: databaseArguments, environment: environment)
        if let level = LogLevel(name: values.string("log-level")) { LogSink.level = max(level, .warning) }
        // A server (`parley serve`) may already run the embedded cluster: then it is adopted and
        // must be left running.
        let pgData = EmbeddedPostgres(configuration: .init(dataDirectory: values.string("data-dir"))).pgData
        let alreadyRunning = access(pgData + "/postmaster.pid", F_OK) == 0
        let provisioned = try DatabaseProvisioner(databaseURL: values.optionalString("database-url"), dataDirectory: values.string("data-dir")).provision()
        defer { if !alreadyRunning { try? provisioned.embedded?.stop() } }
        _ = try MigrationRunner.apply(connectionString: provisioned.connectionString, directory: values.optionalString("migrations-dir"))
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: provisioned.connectionString, connectionsPerLoop: 1))
        client.start()
        let done = Latch()
        let code = Atomic<Int32>(1)
        Task {
            do {
                try await client.waitUntilReady()
                code.store(await AccountsCLI.run(arguments: rest, database: client), ordering: .relaxed)
            } catch {
                AccountsCLI.IO.standard.error("parley: database unavailable: \(error)")
            }
            await client.shutdown()
            done.open()
        }
        done.wait()
        return code.load(ordering: .relaxed)
    }
}

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
