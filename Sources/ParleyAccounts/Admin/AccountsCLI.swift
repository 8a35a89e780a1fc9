#if canImport(Glibc)
import Glibc
#endif
import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// `parley user …` and `parley session …`: operator commands over the accounts tables.
///
/// Human-readable tables by default, `--json` for scripts. Exit codes: 0 success, 1 failure
/// (not found, conflict, database), 2 usage error.
public enum AccountsCLI {
    /// Where the commands read and write (the process's standard streams by default).
    public typealias IO = CommandIO

    public static let usage = """
    Usage:
      parley user list [--where JSON] [--limit N] [--json]
      parley user show ID|USERNAME [--json]
      parley user create USERNAME [--password-stdin] [--email E] [--set key=value]... [--json]
      parley user delete ID|USERNAME
      parley user ban ID|USERNAME
      parley user unban ID|USERNAME
      parley user reset-password ID|USERNAME [--password-stdin]
      parley user sessions ID|USERNAME [--json]
      parley user revoke ID|USERNAME          (every session of the user)
      parley session revoke TOKEN|ID
    Database options are those of `parley migrate` (--database-url or the embedded data directory).
    """

    /// Runs `arguments` (starting with `user` or `session`) against `database`, hashing on a
    /// private one-thread pool; `writes` makes the user writes from the `Accounts` (through the
    /// stores alone when nil). Returns the exit code.
    public static func run(arguments: [String], database: PostgresClient, output: IO = .standard,
                           writes: (@Sendable (Accounts) -> any UserWrites)? = nil) async -> Int32 {
        let pool: BlockingPool
        do {
            pool = try BlockingPool(threads: 1, queueLimit: 16)
        } catch {
            output.error("parley: cannot start a worker thread: \(error)")
            return 1
        }
        defer { pool.shutdown() }
        let accounts = Accounts(database: database, blockingPool: pool, logger: Logger(label: "admin"))
        return await run(arguments: arguments, accounts: accounts, io: output, writes: writes?(accounts))
    }

    /// Runs `arguments` against an existing `Accounts`; `writes` makes the user writes (through
    /// the stores alone when nil).
    public static func run(arguments: [String], accounts: Accounts, io: IO = .standard, writes: (any UserWrites)? = nil) async -> Int32 {
        let writes = writes ?? DirectUserWrites(accounts: accounts)
        do {
            var args = try Arguments(arguments)
            switch (args.positional.first, args.positional.dropFirst().first) {
            case ("user", "list"?): try await list(&args, accounts, io)
            case ("user", "show"?): try await show(&args, accounts, io)
            case ("user", "create"?): try await create(&args, accounts, writes, io)
            case ("user", "delete"?): try await delete(&args, accounts, writes, io)
            case ("user", "ban"?): try await ban(&args, accounts, io, banned: true)
            case ("user", "unban"?): try await ban(&args, accounts, io, banned: false)
            case ("user", "reset-password"?): try await resetPassword(&args, accounts, writes, io)
            case ("user", "sessions"?): try await sessions(&args, accounts, io)
            case ("user", "revoke"?): try await revokeAll(&args, accounts, io)
            case ("session", "revoke"?): try await revoke(&args, accounts, io)
            default: throw CLIError.usage("unknown command")
            }
            return 0
        } catch let error as CLIError {
            switch error {
            case .usage(let message):
                io.error("parley: \(message)\n\n\(usage)")
                return 2
            case .failed(let message):
                io.error("parley: \(message)")
                return 1
            }
        } catch let error as ParseError {
            io.error("parley: \(error.code == 1 ? error.description : error.message)")
            return 1
        } catch let error as UserWriteRefused {
            io.error("parley: \(error.message) (code \(error.code))")
            return 1
        } catch {
            io.error("parley: \(error)")
            return 1
        }
    }

    enum CLIError: Error {
        case usage(String)
        case failed(String)
    }

    /// Positional arguments, `--flag value` options (repeatable) and `--switch`es.
    struct Arguments {
        static let switches: Set<String> = ["--json", "--password-stdin"]
        static let valued: Set<String> = ["--where", "--limit", "--email", "--set"]
        var positional: [String] = []
        var values: [String: [String]] = [:]
        var flags: Set<String> = []

        init(_ arguments: [String]) throws(CLIError) {
            var iterator = arguments.makeIterator()
            while let argument = iterator.next() {
                if Self.switches.contains(argument) {
                    flags.insert(argument)
                } else if Self.valued.contains(argument) {
                    guard let value = iterator.next() else { throw .usage("\(argument) needs a value") }
                    values[argument, default: []].append(value)
                } else if argument.hasPrefix("--") {
                    throw .usage("unknown option \(argument)")
                } else {
                    positional.append(argument)
                }
            }
        }

        var json: Bool { flags.contains("--json") }

        /// The one operand after `user <verb>`.
        func target() throws(CLIError) -> String {
            guard positional.count == 3 else { throw .usage("expected exactly one \(positional.count < 3 ? "ID or username" : "operand")") }
            return positional[2]
        }

        func noOperands() throws(CLIError) {
            guard positional.count == 2 else { throw .usage("unexpected operand \(positional[2])") }
        }
    }

    // MARK: Commands

    private static func list(_ args: inout Arguments, _ accounts: Accounts, _ io: IO) async throws {
        try args.noOperands()
        var query = ParseQuery(className: ClassName.user, order: [ParseQuery.OrderKey(field: "createdAt")])
        if let text = args.values["--where"]?.last {
            guard let value = try? JSONParser().parse(text), case .object = value else { throw CLIError.usage("--where must be a JSON object") }
            query.where = value
        }
        if let text = args.values["--limit"]?.last {
            guard let limit = Int(text), limit >= 0 else { throw CLIError.usage("--limit must be a non-negative integer") }
            query.limit = min(limit, ParseQuery.maxLimit)
        }
        let users = try results(try await QueryRunner().find(query, auth: .master, on: accounts.database))
        let banned = try await bannedStates(users.compactMap { $0["objectId"]?.string }, accounts)
        let rows = users.map { user -> JSONObject in
            var user = user
            if let id = user["objectId"]?.string { user["banned"] = .bool(banned[id] ?? false) }
            return user
        }
        if args.json {
            io.output(JSONValue.array(rows.map(JSONValue.object)).serialized())
        } else {
            io.output(table(["objectId", "username", "email", "banned", "createdAt"], rows))
        }
    }

    private static func show(_ args: inout Arguments, _ accounts: Accounts, _ io: IO) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        var user = try object(try await accounts.users.get(objectId: id, auth: .master, on: accounts.database))
        let extra = try await accounts.database.run("""
            SELECT banned, failed_logins, locked_until, (SELECT count(*) FROM sessions s WHERE s.user_id = u.object_id) AS sessions
            FROM users u WHERE object_id = $1
            """, [.text(id)])
        if let row = extra.first {
            user["banned"] = .bool(row["banned"].bool ?? false)
            user["failedLogins"] = .int(Int64(row["failed_logins"].int ?? 0))
            if let locked = row["locked_until"].timestampMilliseconds { user["lockedUntil"] = .string(UTCTime.iso8601(milliseconds: locked)) }
            user["sessions"] = .int(Int64(row["sessions"].int ?? 0))
        }
        if args.json {
            io.output(JSONValue.object(user).serialized())
        } else {
            let width = user.keys.map(\.count).max() ?? 0
            io.output(user.map { pad($0.key, width) + "  " + text($0.value) }.joined(separator: "\n"))
        }
    }

    private static func create(_ args: inout Arguments, _ accounts: Accounts, _ writes: any UserWrites, _ io: IO) async throws {
        let username = try args.target()
        var body: JSONObject = ["username": .string(username)]
        if let email = args.values["--email"]?.last { body["email"] = .string(email) }
        for assignment in args.values["--set"] ?? [] {
            guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
                throw CLIError.usage("--set expects key=value, got \(assignment)")
            }
            let key = String(assignment[..<equals])
            let raw = String(assignment[assignment.index(after: equals)...])
            body[key] = (try? JSONParser().parse(raw)) ?? .string(raw)
        }
        var generated: String?
        if args.flags.contains("--password-stdin") {
            guard let password = io.readLine(), !password.isEmpty else { throw CLIError.failed("no password on standard input") }
            body["password"] = .string(password)
        } else {
            generated = RandomID.hex(Sodium.randomBytes(12))
            body["password"] = .string(generated!)
        }
        var json = try await writes.create(body)
        json["username"] = .string(username)
        if let generated { json["password"] = .string(generated) }
        if args.json {
            io.output(JSONValue.object(json).serialized())
        } else {
            io.output("created user \(username) (\(json["objectId"]?.string ?? ""))" + (generated.map { "\npassword: \($0)" } ?? ""))
        }
    }

    private static func delete(_ args: inout Arguments, _ accounts: Accounts, _ writes: any UserWrites, _ io: IO) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        try await writes.delete(objectId: id)
        io.output("deleted user \(id)")
    }

    private static func ban(_ args: inout Arguments, _ accounts: Accounts, _ io: IO, banned: Bool) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        let revoked = try await accounts.users.setBanned(objectId: id, banned: banned, on: accounts.database)
        io.output(banned ? "banned user \(id); revoked \(revoked) session(s)" : "unbanned user \(id)")
    }

    private static func resetPassword(_ args: inout Arguments, _ accounts: Accounts, _ writes: any UserWrites, _ io: IO) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        let password: String
        var generated = false
        if args.flags.contains("--password-stdin") {
            guard let line = io.readLine(), !line.isEmpty else { throw CLIError.failed("no password on standard input") }
            password = line
        } else {
            password = RandomID.hex(Sodium.randomBytes(12))
            generated = true
        }
        try await writes.setPassword(objectId: id, password: password)
        io.output("password of \(id) reset; every session revoked" + (generated ? "\npassword: \(password)" : ""))
    }

    private static func sessions(_ args: inout Arguments, _ accounts: Accounts, _ io: IO) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        let sessions = try results(try await accounts.sessions.list(userId: id, limit: 1000, skip: 0, on: accounts.database))
        if args.json {
            io.output(JSONValue.array(sessions.map(JSONValue.object)).serialized())
        } else {
            io.output(table(["objectId", "sessionToken", "installationId", "createdAt", "expiresAt"], sessions))
        }
    }

    private static func revokeAll(_ args: inout Arguments, _ accounts: Accounts, _ io: IO) async throws {
        let id = try await accounts.users.resolve(try args.target(), on: accounts.database)
        let count = try await accounts.sessions.revokeAll(userId: id, reason: .revoked, on: accounts.database)
        io.output("revoked \(count) session(s) of \(id)")
    }

    private static func revoke(_ args: inout Arguments, _ accounts: Accounts, _ io: IO) async throws {
        let target = try args.target()
        if target.hasPrefix("r:") {
            guard try await accounts.sessions.revoke(token: target, on: accounts.database) else { throw CLIError.failed("no session with that token") }
        } else {
            try await accounts.sessions.revoke(sessionId: target, auth: .master, on: accounts.database)
        }
        io.output("revoked session")
    }

    // MARK: Formatting

    /// A JSON object the stores wrote.
    private static func object(_ bytes: [UInt8]) throws -> JSONObject {
        guard case .object(let object) = try JSONParser().parse(bytes) else { throw CLIError.failed("unexpected answer from the store") }
        return object
    }

    /// The objects of a `{"results":[…]}` body.
    private static func results(_ bytes: [UInt8]) throws -> [JSONObject] {
        guard case .array(let items)? = try object(bytes)["results"] else { throw CLIError.failed("unexpected answer from the store") }
        return items.compactMap { if case .object(let item) = $0 { item } else { nil } }
    }

    private static func bannedStates(_ ids: [String], _ accounts: Accounts) async throws -> [String: Bool] {
        guard !ids.isEmpty else { return [:] }
        let rows = try await accounts.database.run("SELECT object_id, banned FROM users WHERE object_id = ANY($1::text[])", [.textArray(ids)])
        var result: [String: Bool] = [:]
        for row in rows { if let id = row["object_id"].string { result[id] = row["banned"].bool ?? false } }
        return result
    }

    /// A plain-text table of `columns` (header, rule, one line per row).
    static func table(_ columns: [String], _ rows: [JSONObject]) -> String {
        let cells = rows.map { row in columns.map { row[$0].map(text) ?? "" } }
        let widths = columns.enumerated().map { index, name in max(name.count, cells.map { $0[index].count }.max() ?? 0) }
        var lines = [zip(columns, widths).map { pad($0, $1) }.joined(separator: "  ")]
        lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for row in cells { lines.append(zip(row, widths).map { pad($0, $1) }.joined(separator: "  ")) }
        lines.append("(\(rows.count) row\(rows.count == 1 ? "" : "s"))")
        return lines.map { line in
            var trimmed = line
            while trimmed.hasSuffix(" ") { trimmed.removeLast() }
            return trimmed
        }.joined(separator: "\n")
    }

    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let string): return string
        case .object(let object) where object["__type"] == "Date": return object["iso"]?.string ?? ""
        default: return value.serialized()
        }
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
