#if canImport(Glibc)
import Glibc
#endif
import ParleyLog

/// `parley <command> [options]`: dispatches to the sub-commands.
public enum CommandLineInterface {
    public static let version = "0.1.0"

    static let usage = """
    Usage: parley <command> [options]

    Commands:
      serve      Run the server (HTTP + WebSocket), applying migrations first.
      migrate    Apply pending database migrations and exit.
      user       Manage users: list, show, create, delete, ban, unban, reset-password, sessions.
      session    Revoke a session: parley session revoke TOKEN|ID
      push       Push jobs: parley push list [--state S] | parley push retry ID|--dead
      stats      Users, devices online, queued events, push jobs by state, calls today [--json].
      help       Show help for a command: parley help serve
      version    Print the version.

    Every command takes --help. Configuration: docs/configuration.md.
    """

    /// Runs the command named by `arguments` (without the program name); returns the exit code.
    public static func run(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else {
            print(usage)
            return 2
        }
        let rest = Array(arguments.dropFirst())
        let environment = ProcessEnvironment.variables()
        do {
            switch command {
            case "serve":
                if rest.contains("--help") { return help(for: "serve") }
                let values = try ConfigValues(options: ServerConfig.options, arguments: rest, environment: environment)
                try rejectOperands(values)
                let config = try ServerConfig(values)
                LogSink.level = config.logLevel
                return try ServeCommand.run(config)
            case "migrate":
                if rest.contains("--help") { return help(for: "migrate") }
                let values = try ConfigValues(options: MigrateCommand.options, arguments: rest, environment: environment)
                try rejectOperands(values)
                if let level = LogLevel(name: values.string("log-level")) { LogSink.level = level }
                return try MigrateCommand.run(values)
            case "help", "--help", "-h":
                if rest.first == "--markdown" || rest.dropFirst().first == "--markdown" {
                    print(ServerConfig.markdownReference(options: ServerConfig.options), terminator: "")
                    return 0
                }
                return rest.first.map { help(for: $0) } ?? { print(usage); return 0 }()
            case "user", "session":
                return try AccountsCommand.run(arguments, environment: environment)
            case "push":
                return try PushCommand.run(arguments, environment: environment)
            case "stats":
                return try StatsCommand.run(arguments, environment: environment)
            case "bench-argon2":
                return Argon2BenchCommand.run(rest)
            case "version", "--version":
                print("parley \(version)")
                return 0
            default:
                printError("unknown command '\(command)'\n\n\(usage)")
                return 2
            }
        } catch let error as ConfigError {
            printError(error.description)
            return 2
        } catch {
            printError("\(error)")
            return 1
        }
    }

    static func help(for command: String) -> Int32 {
        switch command {
        case "serve":
            print(ServerConfig.helpText(command: "serve", summary: "Runs the Parley server. Flags override environment variables.", options: ServerConfig.options))
        case "migrate":
            print(ServerConfig.helpText(command: "migrate", summary: "Applies pending migrations (numbered SQL files) and exits.", options: MigrateCommand.options))
        default:
            print(usage)
            return 2
        }
        return 0
    }

    private static func rejectOperands(_ values: ConfigValues) throws(ConfigError) {
        if let first = values.operands.first { throw .unknownFlag(first) }
    }

    static func printError(_ message: String) {
        var line = Array("parley: \(message)\n".utf8)
        _ = line.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
