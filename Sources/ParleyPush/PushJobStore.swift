import ParleyJSON
import ParleyLog
import ParleyPostgres

/// The `push_jobs` table: claims with `FOR UPDATE SKIP LOCKED` (several nodes share the work),
/// outcomes, lease recovery, token removal, operator views, retention.
public struct PushJobStore: Sendable {
    public let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    // MARK: Worker

    /// Claims up to `limit` due jobs for `node` until `lease` from now (state `sending`, attempts
    /// + 1). A message job is due once it is `collapseWindow` old, so a burst becomes one push.
    /// Each job comes with its message text and sender's `titleField`, and whether it became moot.
    public func claim(limit: Int, node: String, lease: Duration, collapseWindow: Duration, titleField: String) async throws(PushFailure) -> [PushJob] {
        let rows = try await run("""
            WITH due AS (
                SELECT id FROM push_jobs
                 WHERE state = 'pending' AND next_attempt_at <= now()
                   AND (kind <> 'message' OR attempts > 0 OR created_at <= now() - $2 * interval '1 millisecond')
                 ORDER BY next_attempt_at, id
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE push_jobs j
                   SET state = 'sending', attempts = j.attempts + 1, next_attempt_at = now() + $3 * interval '1 millisecond',
                       node_id = $4, updated_at = now()
                  FROM due WHERE j.id = due.id
                RETURNING j.*
            )
            SELECT c.id, c.kind, c.user_id, c.device_id, c.platform, c.token, c.collapse_key, c.seq, c.message_id, c.sender,
                   c.message_count, c.call_id, c.payload, c.expires_at, c.attempts, c.created_at,
                   m.body AS message_text,
                   coalesce(CASE WHEN $5 = 'username' THEN NULL ELSE u.data->>$5 END, u.username) AS sender_name,
                   (c.expires_at IS NOT NULL AND c.expires_at <= now()) AS expired,
                   (c.call_id IS NOT NULL AND EXISTS (SELECT 1 FROM calls k WHERE k.id = c.call_id AND k.state = 'ended')) AS call_ended,
                   (c.seq IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rt_queue q
                                                      WHERE q.user_id = c.user_id AND q.device_id = c.device_id AND q.seq = c.seq)) AS delivered
              FROM claimed c
              LEFT JOIN rt_messages m ON m.id = c.message_id
              LEFT JOIN users u ON u.object_id = c.sender
             ORDER BY c.id
            """, [.int(limit), .int(Self.milliseconds(collapseWindow)), .int(Self.milliseconds(lease)), .text(node), .text(titleField)])
        return rows.compactMap(Self.job)
    }

    static func job(_ row: PostgresRow) -> PushJob? {
        guard let id = row["id"].int, let kind = row["kind"].string.flatMap(PushJob.Kind.init(rawValue:)),
              let user = row["user_id"].string, let device = row["device_id"].string,
              let platform = row["platform"].int.flatMap(PushJob.Platform.init(rawValue:)), let token = row["token"].string
        else { return nil }
        var payload: JSONObject?
        if let text = row["payload"].string, case .object(let object)? = try? JSONParser().parse(text) { payload = object }
        var moot: PushJob.Moot?
        if row["call_ended"].bool == true {
            moot = .callEnded
        } else if row["expired"].bool == true {
            moot = .expired
        } else if row["delivered"].bool == true {
            moot = .delivered
        }
        return PushJob(
            id: Int64(id), kind: kind, userId: user, deviceId: device, platform: platform, token: token,
            collapseKey: row["collapse_key"].string ?? "", seq: row["seq"].int.map(Int64.init), attempt: row["attempts"].int ?? 1,
            createdAt: row["created_at"].timestampMilliseconds ?? 0, sender: row["sender"].string, senderName: row["sender_name"].string,
            messageId: row["message_id"].string, messageText: row["message_text"].string, messageCount: row["message_count"].int ?? 1,
            callId: row["call_id"].string, callPayload: payload, expiresAt: row["expires_at"].timestampMilliseconds, moot: moot)
    }

    /// Records the outcomes of claimed jobs (only where this claim still holds them: same
    /// attempt, still `sending`). A retry past `maxAttempts` makes the job dead. Returns the new
    /// state per job id.
    @discardableResult
    public func finish(_ outcomes: [(job: PushJob, outcome: PushOutcome)], maxAttempts: Int) async throws(PushFailure) -> [Int64: String] {
        guard !outcomes.isEmpty else { return [:] }
        let rows = try await run("""
            UPDATE push_jobs j
               SET state = CASE WHEN x.outcome <> 'retry' THEN x.outcome WHEN j.attempts >= $6 THEN 'dead' ELSE 'pending' END,
                   next_attempt_at = CASE WHEN x.outcome = 'retry' THEN now() + x.delay_ms * interval '1 millisecond' ELSE j.next_attempt_at END,
                   sent_at = CASE WHEN x.outcome = 'sent' THEN now() ELSE j.sent_at END,
                   last_error = nullif(x.error, ''),
                   updated_at = now(),
                   attempt_log = (CASE WHEN jsonb_array_length(j.attempt_log) >= 20 THEN j.attempt_log - 0 ELSE j.attempt_log END)
                       || jsonb_build_object(
                              'at', to_char(j.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                              'result', CASE WHEN x.outcome = 'retry' AND j.attempts >= $6 THEN 'dead' ELSE x.outcome END,
                              'error', nullif(x.error, ''))
              FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]) AS x(id, attempt, outcome, delay_ms, error)
             WHERE j.id = x.id AND j.state = 'sending' AND j.attempts = x.attempt
            RETURNING j.id, j.state
            """, [
                .intArray(outcomes.map { Int($0.job.id) }), .intArray(outcomes.map(\.job.attempt)),
                .textArray(outcomes.map(\.outcome.state)),
                .intArray(outcomes.map { if case .retry(_, let delay) = $0.outcome { Self.milliseconds(delay) } else { 0 } }),
                .textArray(outcomes.map(\.outcome.error)), .int(maxAttempts),
            ])
        var states: [Int64: String] = [:]
        for row in rows {
            if let id = row["id"].int, let state = row["state"].string { states[Int64(id)] = state }
        }
        return states
    }

    /// Returns jobs whose claim expired (their node stopped mid-send) to `pending`, due now, or
    /// `dead` when their attempts are used up. Returns how many were recovered.
    @discardableResult
    public func recoverExpiredLeases(maxAttempts: Int) async throws(PushFailure) -> Int {
        let rows = try await run("""
            UPDATE push_jobs j
               SET state = CASE WHEN j.attempts >= $1 THEN 'dead' ELSE 'pending' END,
                   next_attempt_at = now(), updated_at = now(),
                   last_error = 'the node sending it stopped (lease expired)',
                   attempt_log = (CASE WHEN jsonb_array_length(j.attempt_log) >= 20 THEN j.attempt_log - 0 ELSE j.attempt_log END)
                       || jsonb_build_object('at', to_char(j.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                             'result', 'lost', 'error', 'lease expired')
             WHERE j.state = 'sending' AND j.next_attempt_at < now()
            RETURNING j.id
            """, [.int(maxAttempts)])
        return rows.count
    }

    /// Removes rejected tokens from their installations (only where the installation still has
    /// that token). Returns how many installations changed.
    @discardableResult
    public func removeTokens(_ pairs: [(installationId: String, token: String)]) async throws(PushFailure) -> Int {
        guard !pairs.isEmpty else { return 0 }
        let rows = try await run("""
            UPDATE installations i
               SET device_token = CASE WHEN i.device_token = x.token THEN NULL ELSE i.device_token END,
                   voip_device_token = CASE WHEN i.voip_device_token = x.token THEN NULL ELSE i.voip_device_token END,
                   updated_at = now()
              FROM unnest($1::text[], $2::text[]) AS x(installation_id, token)
             WHERE i.installation_id = x.installation_id AND (i.device_token = x.token OR i.voip_device_token = x.token)
            RETURNING i.object_id
            """, [.textArray(pairs.map(\.installationId)), .textArray(pairs.map(\.token))])
        return rows.count
    }

    /// Jobs per state, for the queue-depth gauges.
    public func countByState() async throws(PushFailure) -> [String: Int] {
        let rows = try await run("""
            SELECT state, count(*) AS n FROM push_jobs WHERE state IN ('pending', 'sending') GROUP BY state
            UNION ALL
            SELECT 'dead', count(*) FROM push_jobs WHERE state = 'dead'
            """, [])
        var counts: [String: Int] = [:]
        for row in rows {
            if let state = row["state"].string { counts[state] = row["n"].int ?? 0 }
        }
        return counts
    }

    /// Deletes finished jobs last changed before `olderThan` ago, `batch` rows at a time.
    /// Dead jobs stay (operators retry or inspect them). Returns the rows deleted.
    public func deleteFinished(olderThan: Duration, batch: Int = 10_000) async throws(PushFailure) -> Int {
        var total = 0
        while true {
            let rows = try await run("""
                DELETE FROM push_jobs WHERE id IN (
                    SELECT id FROM push_jobs
                     WHERE state IN ('sent', 'skipped', 'canceled', 'expired', 'rejected')
                       AND updated_at < now() - $1 * interval '1 millisecond'
                     LIMIT $2)
                RETURNING 1
                """, [.int(Self.milliseconds(olderThan)), .int(batch)])
            total += rows.count
            if rows.count < batch { return total }
        }
    }

    // MARK: Operators

    /// A job as operators see it.
    public struct Summary: Sendable {
        public var id: Int64
        public var kind: String
        public var state: String
        public var userId: String
        public var deviceId: String
        public var platform: Int
        public var attempts: Int
        public var messageCount: Int
        public var callId: String?
        public var lastError: String?
        /// Unix milliseconds.
        public var createdAt: Int64
        public var updatedAt: Int64
        public var nextAttemptAt: Int64?
        public var sentAt: Int64?
        /// `[{at, result, error}]` as JSON text.
        public var attemptLog: String
    }

    /// The newest jobs first, optionally of one state.
    public func list(state: String?, limit: Int) async throws(PushFailure) -> [Summary] {
        let rows = try await run("""
            SELECT id, kind, state, user_id, device_id, platform, attempts, message_count, call_id, last_error,
                   created_at, updated_at, next_attempt_at, sent_at, attempt_log
              FROM push_jobs WHERE ($1 = '' OR state = $1) ORDER BY id DESC LIMIT $2
            """, [.text(state ?? ""), .int(limit)])
        return rows.compactMap { row in
            guard let id = row["id"].int else { return nil }
            let state = row["state"].string ?? ""
            return Summary(
                id: Int64(id), kind: row["kind"].string ?? "", state: state, userId: row["user_id"].string ?? "",
                deviceId: row["device_id"].string ?? "", platform: row["platform"].int ?? 0, attempts: row["attempts"].int ?? 0,
                messageCount: row["message_count"].int ?? 1, callId: row["call_id"].string, lastError: row["last_error"].string,
                createdAt: row["created_at"].timestampMilliseconds ?? 0, updatedAt: row["updated_at"].timestampMilliseconds ?? 0,
                nextAttemptAt: state == "pending" ? row["next_attempt_at"].timestampMilliseconds : nil,
                sentAt: row["sent_at"].timestampMilliseconds, attemptLog: row["attempt_log"].string ?? "[]")
        }
    }

    /// Makes a finished job pending again, due now, with its attempts reset (its attempt log stays).
    public func retry(id: Int64) async throws(PushFailure) {
        let current = try await run("SELECT state FROM push_jobs WHERE id = $1", [.int(Int(id))])
        guard let state = current.first?["state"].string else { throw .notFound(id) }
        guard state != "pending" && state != "sending" else { throw .notRetryable(id: id, state: state) }
        do {
            let rows = try await database.query("""
                UPDATE push_jobs SET state = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL, updated_at = now()
                 WHERE id = $1 AND state NOT IN ('pending', 'sending') RETURNING id
                """, [.int(Int(id))])
            guard !rows.isEmpty else { throw PushFailure.notRetryable(id: id, state: "pending") }
        } catch let error as PostgresError {
            if case .server(let server) = error, server.sqlState == "23505" { throw .duplicatePending(id) }
            throw .database(error)
        } catch let error as PushFailure {
            throw error
        } catch {
            throw .notRetryable(id: id, state: state)
        }
    }

    /// Makes every dead job pending again (one per device and collapse key, and none where a
    /// pending job for it exists). Returns the ids.
    public func retryDead() async throws(PushFailure) -> [Int64] {
        let rows = try await run("""
            WITH pick AS (
                SELECT DISTINCT ON (d.user_id, d.device_id, d.collapse_key) d.id
                  FROM push_jobs d
                 WHERE d.state = 'dead'
                   AND NOT EXISTS (SELECT 1 FROM push_jobs p WHERE p.state = 'pending' AND p.user_id = d.user_id
                                      AND p.device_id = d.device_id AND p.collapse_key = d.collapse_key)
                 ORDER BY d.user_id, d.device_id, d.collapse_key, d.id DESC
            )
            UPDATE push_jobs j SET state = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL, updated_at = now()
              FROM pick WHERE j.id = pick.id
            RETURNING j.id
            """, [])
        return rows.compactMap { $0["id"].int.map(Int64.init) }.sorted()
    }

    // MARK: Helpers

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    private func run(_ sql: String, _ params: [PostgresData]) async throws(PushFailure) -> PostgresRows {
        do {
            return try await database.query(sql, params)
        } catch {
            throw .database(error)
        }
    }
}
