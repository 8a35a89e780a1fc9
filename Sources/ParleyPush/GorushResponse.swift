import ParleyJSON

/// What a gorush gateway answered to `POST /api/push`.
///
/// In sync mode (`core.sync: true`) gorush sends every notification before answering and lists
/// the failed ones in `logs` (`{"type":"failed-push","notif_id":…,"token":…,"error":…}`);
/// notifications not listed were accepted by APNs or FCM. In async mode `logs` is empty and
/// only acceptance into gorush's queue is known.
public struct GorushResponse: Sendable, Equatable {
    public struct Failure: Sendable, Equatable {
        /// The job id we sent as `notif_id` (nil if gorush left it out).
        public var notificationID: String?
        /// The token (gorush masks it when `log.hide_token` is on).
        public var token: String?
        public var error: String
    }

    /// How many tokens gorush counted.
    public var counts: Int?
    public var failures: [Failure]

    /// Parses a 200 response body; nil when it is not gorush's JSON.
    public static func parse(_ body: [UInt8]) -> GorushResponse? {
        guard case .object(let object)? = try? JSONParser(maxBytes: 1 << 20).parse(body) else { return nil }
        var failures: [Failure] = []
        if let logs = object["logs"]?.array {
            for entry in logs {
                guard let entry = entry.object else { continue }
                // Only failures are listed in sync mode; be explicit anyway.
                if let type = entry["type"]?.string, type != "failed-push" { continue }
                failures.append(Failure(notificationID: nonEmpty(entry["notif_id"]?.string), token: nonEmpty(entry["token"]?.string),
                                        error: entry["error"]?.string ?? "failed"))
            }
        }
        return GorushResponse(counts: object["counts"]?.int.map(Int.init), failures: failures)
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    /// The failure reported for each job of a batch, by job id: matched by `notif_id`, else by
    /// the exact token.
    public func failuresByJob(_ jobs: [PushJob]) -> [Int64: String] {
        var result: [Int64: String] = [:]
        let ids = Set(jobs.map(\.id))
        for failure in failures {
            if let notification = failure.notificationID, let id = Int64(notification), ids.contains(id) {
                result[id] = failure.error
            } else if let token = failure.token {
                for job in jobs where job.token == token { result[job.id] = failure.error }
            }
        }
        return result
    }
}
