import ParleyPush

/// `parley push …`: runs `PushCLI` against the configured database.
public enum PushCommand {
    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        try AdminCommand.run(arguments, environment: environment, usage: PushCLI.usage) { arguments, database in
            await PushCLI.run(arguments: arguments, database: database)
        }
    }
}
