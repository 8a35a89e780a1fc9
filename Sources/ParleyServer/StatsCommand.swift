import ParleyAccounts
import ParleyCalls
import ParleyJSON
import ParleyLog
import ParleyPostgres
import ParleyPush
import ParleyRealtime

/// `parley stats [--json]`: what the node's tables hold now, composed from each domain's own
/// stats (accounts, realtime, push, calls). Exit codes as the other operator commands.
public enum StatsCommand {
    static let usage = """
    Usage: parley stats [--json]
      Users, devices online, queued events, push jobs by state and calls today.
    Database options are those of `parley migrate` (--database-url or the embedded data directory).
    """

    /// One reading of every domain's numbers.
    struct Snapshot: Sendable, Equatable {
        var accounts: AccountsStats
        var realtime: RealtimeStats
        var push: PushStats
        var calls: CallStats
        var takenAt: Int64
    }

    public static func run(_ arguments: [String], environment: [String: String]) throws -> Int32 {
        try AdminCommand.run(arguments, environment: environment, usage: usage, minimumArguments: 1) { arguments, database in
            await run(arguments: arguments, database: database)
        }
    }

    /// Runs `arguments` (starting with `stats`) against `database`; returns the exit code.
    static func run(arguments: [String], database: PostgresClient, io: CommandIO = .standard) async -> Int32 {
        let options = arguments.dropFirst()
        guard options.allSatisfy({ $0 == "--json" }) else {
            io.error("parley: unknown argument \(options.first { $0 != "--json" } ?? "")\n\n\(usage)")
            return 2
        }
        do throws(PostgresError) {
            let snapshot = Snapshot(
                accounts: try await AccountsStats.read(from: database), realtime: try await RealtimeStats.read(from: database),
                push: try await PushStats.read(from: database), calls: try await CallStats.read(from: database),
                takenAt: UTCTime.nowMilliseconds())
            io.output(options.isEmpty ? text(snapshot) : json(snapshot).serialized())
            return 0
        } catch {
            io.error("parley: \(error)")
            return 1
        }
    }

    static func json(_ s: Snapshot) -> JSONValue {
        var jobs = JSONObject()
        for (state, count) in s.push.jobsByState { jobs[state] = .int(Int64(count)) }
        return [
            "users": .int(Int64(s.accounts.users)), "bannedUsers": .int(Int64(s.accounts.bannedUsers)),
            "activeSessions": .int(Int64(s.accounts.activeSessions)),
            "devicesOnline": .int(Int64(s.realtime.devicesOnline)), "devices": .int(Int64(s.realtime.devices)),
            "liveNodes": .int(Int64(s.realtime.liveNodes)), "queuedEvents": .int(Int64(s.realtime.queuedEvents)),
            "pushJobs": .object(jobs),
            "callsToday": .int(Int64(s.calls.callsToday)), "liveCalls": .int(Int64(s.calls.liveCalls)),
            "at": .string(UTCTime.iso8601(milliseconds: s.takenAt)),
        ]
    }

    static func text(_ s: Snapshot) -> String {
        let jobs = s.push.jobsByState.map { "\($0.state) \($0.count)" }.joined(separator: ", ")
        let lines = [
            ("users", "\(s.accounts.users) (\(s.accounts.bannedUsers) banned, \(s.accounts.activeSessions) active sessions)"),
            ("devices online", "\(s.realtime.devicesOnline) of \(s.realtime.devices) (\(s.realtime.liveNodes) live node\(s.realtime.liveNodes == 1 ? "" : "s"))"),
            ("queued events", "\(s.realtime.queuedEvents)"),
            ("push jobs", jobs),
            ("calls today", "\(s.calls.callsToday) (\(s.calls.liveCalls) live)"),
        ]
        let width = lines.map(\.0.count).max() ?? 0
        return lines.map { $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }.joined(separator: "\n")
            + "\n(at \(UTCTime.iso8601(milliseconds: s.takenAt)))"
    }
}
