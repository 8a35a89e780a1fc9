import ParleyAccounts
import ParleyCloud
import ParleyLog
import ParleyNet
import ParleyParse

/// `parley user …` / `parley session …`: runs `AccountsCLI` against the configured database. Its
/// user writes (create, delete, reset-password) go through the Parse API's trigger step, so
/// `_User`'s Cloud Code triggers apply (their after* deliveries are sent by a serving node).
public enum AccountsCommand {
    static let usage = AccountsCLI.usage + """

    Webhook options (--webhook-key, --webhook-timeout, …) are those of `parley serve`: user create,
    delete and reset-password run the _User class's Cloud Code triggers.
    """

    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        try AdminCommand.run(arguments, environment: environment, usage: usage, options: ServerConfig.cloudOptions,
                             settings: ServerConfig.cloudConfiguration) { arguments, database, configuration in
            let pool: BlockingPool
            do {
                pool = try BlockingPool(threads: 1, queueLimit: 16)
            } catch {
                CommandLineInterface.printError("cannot start a worker thread: \(error)")
                return 1
            }
            defer { pool.shutdown() }
            let cloud = CloudCode(database: database, group: database.group, configuration: configuration, blockingPool: pool, logger: Logger(label: "cloud"))
            defer { cloud.stop(timeout: .zero) }
            return await AccountsCLI.run(arguments: arguments, database: database) { accounts in
                ParseUserWrites(api: ParseAPI(configuration: ParseConfiguration(applicationID: "parley-cli"), accounts: accounts, cloud: cloud))
            }
        }
    }
}
