#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import ParleyNet
import ParleyPostgres
import Synchronization

/// The shared shape of the operator commands (`parley user|session|push|stats …`): split the database
/// options (as `parley migrate` takes them) from the command's own arguments, connect (adopting a
/// running embedded cluster without ever stopping it), apply pending migrations, run, exit.
enum AdminCommand {
    static let databaseOptions = MigrateCommand.options

    /// Runs `body` with a connected client; returns its exit code (1 when the database is unreachable).
    /// Fewer than `minimumArguments` (the command word included) prints `usage`.
    static func run(
        _ arguments: [String], environment: [String: String], usage: String, minimumArguments: Int = 2,
        body: @escaping @Sendable (_ arguments: [String], _ database: PostgresClient) async -> Int32
    ) throws -> Int32 {
        try run(arguments, environment: environment, usage: usage, minimumArguments: minimumArguments, options: [], settings: { _ in () }) {
            arguments, database, _ in await body(arguments, database)
        }
    }

    /// `run` for a command that also takes `options` (beside the database ones): `settings` reads
    /// them (a bad value fails before anything connects) into what `body` gets.
    static func run<Settings: Sendable>(
        _ arguments: [String], environment: [String: String], usage: String, minimumArguments: Int = 2, options: [ConfigOption],
        settings: (ConfigValues) throws -> Settings,
        body: @escaping @Sendable (_ arguments: [String], _ database: PostgresClient, _ settings: Settings) async -> Int32
    ) throws -> Int32 {
        var optionArguments: [String] = []
        var rest: [String] = []
        var iterator = arguments.makeIterator()
        let flags = Set((databaseOptions + options).map(\.flag))
        while let argument = iterator.next() {
            if flags.contains(argument), let value = iterator.next() {
                optionArguments += [argument, value]
            } else {
                rest.append(argument)
            }
        }
        if rest.contains("--help") || rest.count < minimumArguments {
            print(usage)
            return rest.contains("--help") ? 0 : 2
        }
        let values = try ConfigValues(options: databaseOptions + options, arguments: optionArguments, environment: environment)
        let parsed = try settings(values)
        if let level = LogLevel(name: values.string("log-level")) { LogSink.level = max(level, .warning) }
        let provisioned = try DatabaseProvisioner(databaseURL: values.optionalString("database-url"), dataDirectory: values.string("data-dir")).provision(ownAdopted: false)
        defer { try? provisioned.embedded?.stop() }
        _ = try MigrationRunner.apply(connectionString: provisioned.connectionString, directory: values.optionalString("migrations-dir"))
        let group = try EventLoopGroup(threads: 1)
        defer { group.shutdownGracefully() }
        let client = PostgresClient(group: group, configuration: PostgresConfiguration(connectionString: provisioned.connectionString, connectionsPerLoop: 1))
        client.start()
        let done = Latch()
        let code = Atomic<Int32>(1)
        let commandArguments = rest
        Task {
            do {
                try await client.waitUntilReady()
                code.store(await body(commandArguments, client, parsed), ordering: .relaxed)
            } catch {
                CommandLineInterface.printError("database unavailable: \(error)")
            }
            await client.shutdown()
            done.open()
        }
        done.wait()
        return code.load(ordering: .relaxed)
    }
}
