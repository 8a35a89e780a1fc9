#if canImport(Glibc)
import Glibc
#endif
import ParleyJSON
import ParleyLog
import ParleyPostgres

/// `parley push list|retry`: operator commands over the push jobs.
///
/// Tables by default, `--json` for scripts. Exit codes: 0 success, 1 failure, 2 usage error.
public enum PushCLI {
    public static let usage = """
    Usage:
      parley push list [--state pending|sending|sent|dead|rejected|skipped|canceled|expired] [--limit N] [--json]
      parley push retry ID|--dead [--json]
    Database options are those of `parley migrate` (--database-url or the embedded data directory).
    A retried job is sent by a running `parley serve` within its poll interval.
    """

    static let states = Set(PushStats.states)

    /// Where the commands read and write (the process's standard streams by default).
    public typealias IO = CommandIO

    private enum CLIError: Error {
        case usage(String)
    }

    /// Runs `arguments` (starting with `push`) against `database`; returns the exit code.
    public static func run(arguments: [String], database: PostgresClient, io: IO = .standard) async -> Int32 {
        let store = PushJobStore(database: database)
        do {
            var positional: [String] = []
            var values: [String: String] = [:]
            var flags: Set<String> = []
            var iterator = arguments.makeIterator()
            while let argument = iterator.next() {
                switch argument {
                case "--json", "--dead":
                    flags.insert(argument)
                case "--state", "--limit":
                    guard let value = iterator.next() else { throw CLIError.usage("\(argument) needs a value") }
                    values[argument] = value
                default:
                    if argument.hasPrefix("--") { throw CLIError.usage("unknown option \(argument)") }
                    positional.append(argument)
                }
            }
            let json = flags.contains("--json")
            switch (positional.first, positional.dropFirst().first) {
            case ("push", "list"?):
                guard positional.count == 2, !flags.contains("--dead") else { throw CLIError.usage("list takes no operand") }
                let state = values["--state"]
                if let state, !states.contains(state) { throw CLIError.usage("unknown state \(state)") }
                var limit = 50
                if let text = values["--limit"] {
                    guard let parsed = Int(text), parsed > 0 else { throw CLIError.usage("--limit must be a positive integer") }
                    limit = min(parsed, 10_000)
                }
                let jobs = try await store.list(state: state, limit: limit)
                io.output(json ? JSONValue.array(jobs.map { .object(object($0)) }).serialized() : table(jobs))
            case ("push", "retry"?):
                guard values.isEmpty else { throw CLIError.usage("retry takes ID or --dead") }
                let ids: [Int64]
                if flags.contains("--dead") {
                    guard positional.count == 2 else { throw CLIError.usage("give ID or --dead, not both") }
                    ids = try await store.retryDead()
                } else {
                    guard positional.count == 3, let id = Int64(positional[2]) else { throw CLIError.usage("retry needs a job ID or --dead") }
                    try await store.retry(id: id)
                    ids = [id]
                }
                if json {
                    io.output(JSONValue.object(["retried": .array(ids.map { .int($0) })]).serialized())
                } else {
                    io.output(ids.isEmpty ? "no job to retry" : "retrying \(ids.count) job\(ids.count == 1 ? "" : "s"): "
                              + ids.map(String.init).joined(separator: " "))
                }
            default:
                throw CLIError.usage("unknown command")
            }
            return 0
        } catch let error as CLIError {
            guard case .usage(let message) = error else { return 2 }
            io.error("parley: \(message)\n\n\(usage)")
            return 2
        } catch {
            io.error("parley: \(error)")
            return 1
        }
    }

    static func object(_ job: PushJobStore.Summary) -> JSONObject {
        var object: JSONObject = [
            "id": .int(job.id), "kind": .string(job.kind), "state": .string(job.state), "userId": .string(job.userId),
            "deviceId": .string(job.deviceId), "platform": .string(job.platform == 1 ? "ios" : "android"),
            "attempts": .int(Int64(job.attempts)), "messageCount": .int(Int64(job.messageCount)),
            "createdAt": .string(UTCTime.iso8601(milliseconds: job.createdAt)),
            "updatedAt": .string(UTCTime.iso8601(milliseconds: job.updatedAt)),
        ]
        if let callId = job.callId { object["callId"] = .string(callId) }
        if let next = job.nextAttemptAt { object["nextAttemptAt"] = .string(UTCTime.iso8601(milliseconds: next)) }
        if let sent = job.sentAt { object["sentAt"] = .string(UTCTime.iso8601(milliseconds: sent)) }
        if let error = job.lastError { object["lastError"] = .string(error) }
        object["attemptLog"] = (try? JSONParser().parse(job.attemptLog)) ?? .array([])
        return object
    }

    static func table(_ jobs: [PushJobStore.Summary]) -> String {
        let columns = ["ID", "STATE", "KIND", "USER", "DEVICE", "ATTEMPTS", "CREATED", "NEXT/SENT", "ERROR"]
        let rows = jobs.map { job -> [String] in
            let when = job.sentAt ?? job.nextAttemptAt
            var error = job.lastError ?? ""
            if error.count > 60 { error = String(error.prefix(59)) + "…" }
            return [String(job.id), job.state, job.kind, job.userId, job.deviceId, String(job.attempts),
                    UTCTime.iso8601(milliseconds: job.createdAt), when.map { UTCTime.iso8601(milliseconds: $0) } ?? "", error]
        }
        let widths = columns.indices.map { index in max(columns[index].count, rows.map { $0[index].count }.max() ?? 0) }
        func line(_ cells: [String]) -> String {
            var text = zip(cells, widths).map { $0 + String(repeating: " ", count: max(0, $1 - $0.count)) }.joined(separator: "  ")
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }
        var lines = [line(columns), line(widths.map { String(repeating: "-", count: $0) })]
        lines += rows.map(line)
        lines.append("(\(jobs.count) job\(jobs.count == 1 ? "" : "s"))")
        return lines.joined(separator: "\n")
    }
}
