import ParleyAccounts

/// `parley user …` / `parley session …`: runs `AccountsCLI` against the configured database.
public enum AccountsCommand {
    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        try AdminCommand.run(arguments, environment: environment, usage: AccountsCLI.usage) { arguments, database in
            await AccountsCLI.run(arguments: arguments, database: database)
        }
    }
}
