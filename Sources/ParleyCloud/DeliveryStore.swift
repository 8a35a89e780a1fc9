import ParleyJSON
import ParleyPostgres

/// The `cloud_deliveries` and `cloud_jobs` tables: webhook calls made at least once (after*
/// triggers, jobs), claimed by one node at a time (`FOR UPDATE SKIP LOCKED`, with a lease that
/// another node takes over when it expires), deleted once answered.
public struct DeliveryStore: Sendable {
    /// One claimed delivery.
    public struct Claimed: Sendable {
        public let id: Int
        public let kind: String
        public let url: String
        public let body: String
        public let jobId: String?
        public let attempt: Int
    }

    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    /// The statement that queues an after-trigger delivery, to run in the transaction of the
    /// change it announces.
    public static func enqueueTrigger(url: String, body: JSONObject) -> (sql: String, params: [PostgresData]) {
        ("INSERT INTO cloud_deliveries (kind, url, body) VALUES ('trigger', $1, $2)", [.text(url), .text(JSONValue.object(body).serialized())])
    }

    /// Queues an after-trigger delivery on its own (not tied to a change's transaction).
    public func enqueue(url: String, body: JSONObject) async throws(PostgresError) {
        let statement = Self.enqueueTrigger(url: url, body: body)
        _ = try await database.query(statement.sql, statement.params)
    }

    /// Records a job (`_JobStatus`, status `pending`) and its delivery in one statement.
    public func enqueueJob(id: String, name: String, params: JSONObject, url: String, body: JSONObject) async throws(PostgresError) {
        _ = try await database.query("""
            WITH job AS (INSERT INTO cloud_jobs (object_id, job_name, params) VALUES ($1, $2, $3) RETURNING object_id)
            INSERT INTO cloud_deliveries (kind, url, body, job_id) SELECT 'job', $4, $5, object_id FROM job
            """, [.text(id), .text(name), .json(JSONValue.object(params).serialized()), .text(url), .text(JSONValue.object(body).serialized())])
    }

    /// Claims up to `limit` due deliveries (or ones whose lease expired) for `lease`; their jobs
    /// become `running`.
    public func claim(limit: Int, lease: Duration, jobLease: Duration) async throws(PostgresError) -> [Claimed] {
        let rows = try await database.query("""
            WITH due AS (
                SELECT id FROM cloud_deliveries
                 WHERE (state = 'pending' AND due_at <= now()) OR (state = 'sending' AND leased_until < now())
                 ORDER BY due_at, id
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE cloud_deliveries d
                   SET state = 'sending', attempts = d.attempts + 1,
                       leased_until = now() + (CASE WHEN d.kind = 'job' THEN $3 ELSE $2 END) * interval '1 millisecond'
                  FROM due WHERE d.id = due.id
                RETURNING d.id, d.kind, d.url, d.body, d.job_id, d.attempts
            ), running AS (
                UPDATE cloud_jobs j SET status = 'running', updated_at = now()
                  FROM claimed WHERE j.object_id = claimed.job_id AND j.status = 'pending'
            )
            SELECT * FROM claimed
            """, [.int(limit), .int(Int(lease.wholeMilliseconds)), .int(Int(jobLease.wholeMilliseconds))])
        return rows.compactMap { row in
            guard let id = row["id"].int, let kind = row["kind"].string, let url = row["url"].string, let body = row["body"].string else { return nil }
            return Claimed(id: id, kind: kind, url: url, body: body, jobId: row["job_id"].string, attempt: row["attempts"].int ?? 1)
        }
    }

    /// The webhook answered: the delivery is done; its job (if any) succeeded or failed with `message`.
    public func finish(_ delivery: Claimed, succeeded: Bool, message: String?) async throws(PostgresError) {
        _ = try await database.query("""
            WITH done AS (DELETE FROM cloud_deliveries WHERE id = $1 AND attempts = $2 RETURNING job_id)
            UPDATE cloud_jobs j SET status = $3, message = $4, updated_at = now(), finished_at = now()
              FROM done WHERE j.object_id = done.job_id
            """, [.int(delivery.id), .int(delivery.attempt), .text(succeeded ? "succeeded" : "failed"), message.map { .text($0) } ?? .null])
    }

    /// The call failed before any answer: due again after `delay`, or dead (its job failed)
    /// after `maxAttempts` or once the delivery is older than `maxAge`. Returns true when it is dead.
    @discardableResult
    public func retry(_ delivery: Claimed, error: String, delay: Duration, maxAttempts: Int, maxAge: Duration) async throws(PostgresError) -> Bool {
        let rows = try await database.query("""
            WITH changed AS (
                UPDATE cloud_deliveries
                   SET state = CASE WHEN $3 OR created_at < now() - $6 * interval '1 millisecond' THEN 'dead' ELSE 'pending' END,
                       due_at = now() + $4 * interval '1 millisecond', leased_until = NULL, last_error = $5
                 WHERE id = $1 AND attempts = $2 RETURNING job_id, state
            ), failed AS (
                UPDATE cloud_jobs j SET status = 'failed', message = $5, updated_at = now(), finished_at = now()
                  FROM changed WHERE j.object_id = changed.job_id AND changed.state = 'dead'
            )
            SELECT state FROM changed
            """, [.int(delivery.id), .int(delivery.attempt), .bool(delivery.attempt >= maxAttempts), .int(Int(delay.wholeMilliseconds)), .text(error),
                  .int(Int(maxAge.wholeMilliseconds))])
        return rows.first?["state"].string == "dead"
    }

    /// Deletes the trigger deliveries beyond the newest `keeping` (dead ones go first, then the
    /// oldest pending), at most 50,000 per call; answers how many of each went. Jobs are never dropped.
    public func trim(keeping: Int) async throws(PostgresError) -> (pending: Int, dead: Int) {
        let rows = try await database.query("""
            WITH excess AS (
                SELECT id FROM cloud_deliveries WHERE kind = 'trigger'
                 ORDER BY (state = 'dead'), id DESC OFFSET $1 LIMIT 50000
            ), dropped AS (
                DELETE FROM cloud_deliveries d USING excess WHERE d.id = excess.id RETURNING d.state
            )
            SELECT count(*) FILTER (WHERE state = 'dead') AS dead, count(*) FILTER (WHERE state <> 'dead') AS pending FROM dropped
            """, [.int(keeping)])
        return (rows.first?["pending"].int ?? 0, rows.first?["dead"].int ?? 0)
    }

    /// `_JobStatus` rows as Parse objects, newest first, optionally one (`objectId`) or filtered
    /// by `jobName` / `status`.
    public func jobs(objectId: String? = nil, jobName: String? = nil, status: String? = nil, limit: Int = 100, skip: Int = 0)
        async throws(PostgresError) -> [JSONObject] {
        var conditions: [String] = []
        var params: [PostgresData] = []
        for (column, value) in [("object_id", objectId), ("job_name", jobName), ("status", status)] {
            if let value {
                params.append(.text(value))
                conditions.append("\(column) = $\(params.count)")
            }
        }
        params.append(.int(limit))
        params.append(.int(skip))
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let rows = try await database.query("""
            SELECT object_id, job_name, params::text AS params, status, message, source,
                   to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created,
                   to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS updated,
                   to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS finished
              FROM cloud_jobs \(filter) ORDER BY created_at DESC, object_id LIMIT $\(params.count - 1) OFFSET $\(params.count)
            """, params)
        return rows.map { row in
            var object: JSONObject = [
                "objectId": .string(row["object_id"].string ?? ""), "jobName": .string(row["job_name"].string ?? ""),
                "status": .string(row["status"].string ?? ""), "source": .string(row["source"].string ?? "api"),
                "createdAt": .string(row["created"].string ?? ""), "updatedAt": .string(row["updated"].string ?? ""),
            ]
            if let text = row["params"].string, let params = try? JSONParser().parse(text) { object["params"] = params }
            if let message = row["message"].string { object["message"] = .string(message) }
            if let finished = row["finished"].string { object["finishedAt"] = ["__type": "Date", "iso": .string(finished)] }
            return object
        }
    }
}
