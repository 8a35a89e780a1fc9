import ParleyLog
import ParleyNet
import ParleyPostgres
import ParleyPush
import Synchronization

/// `parley push …`: connects like `parley migrate` (same database options), applies pending
/// migrations, then runs `PushCLI`.
public enum PushCommand {
    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        var databaseArguments: [String] = []
        var rest: [String] = []
        var iterator = arguments.makeIterator()
        let flags = Set(MigrateCommand.options.map(\.flag))
        while let argument = iterator.next() {
            if flags.contains(argument), let value = iterator.next() {
                databaseArguments += [argument, value]
            } else {
                rest.append(argument)
            }
        }
        if rest.contains("--help") || rest.count < 2 {
            print(PushCLI.usage)
            return rest.contains("--help") ? 0 : 2
        }
        let values = try ConfigValues(options: MigrateCommand.options, arguments: databaseArguments, environment: environment)
        if let level = LogLevel(name: values.string("log-level")) { LogSink.level = max(level, .warning) }
        // A running `parley serve` may own the embedded cluster: adopt it and leave it running.
        let provisioned = try DatabaseProvisioner(databaseURL: values.optionalString("database-url"), dataDirectory: values.string("data-dir")).provision(ownAdopted: false)
        defer { try? provisioned.embedded?.stop() }
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
                code.store(await PushCLI.run(arguments: rest, database: client), ordering: .relaxed)
            } catch {
                PushCLI.IO.standard.error("parley: database unavailable: \(error)")
            }
            await client.shutdown()
            done.open()
        }
        done.wait()
        return code.load(ordering: .relaxed)
    }
}
