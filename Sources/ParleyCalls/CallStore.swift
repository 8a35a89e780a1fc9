import ParleyJSON
import ParleyPostgres
import ParleyRealtime

/// The `calls` table: each call's record, and a user's history.
public struct CallStore: Sendable {
    /// Most calls `history` returns at once.
    public static let maxPageSize = 200

    let database: PostgresClient
    /// Written into each row, so a node's leftover live calls can be closed at its next start.
    let nodeId: String
    /// The accounts layer's `(ids text[]) → SETOF text` function listing which ids are users
    /// (`Accounts.existingUsersFunction`, wired by the server): calls read no table of another module.
    let existingUsers: String
    /// Whether `insert` also reads the callee's devices, through the realtime layer's
    /// `RealtimeSQLFunctions.userDevices` (same database), saving the service a statement per call.
    public let readsCalleeDevices: Bool

    /// `readsCalleeDevices`: the realtime layer's devices live in `database` (the server's
    /// setup); without it the service asks its transport for them.
    public init(database: PostgresClient, nodeId: String, existingUsers: String, readsCalleeDevices: Bool = false) {
        precondition(existingUsers.utf8.allSatisfy { $0 == UInt8(ascii: "_") || ($0 >= 97 && $0 <= 122) }, "a SQL function name")
        self.database = database
        self.nodeId = nodeId
        self.existingUsers = existingUsers
        self.readsCalleeDevices = readsCalleeDevices
    }

    /// Commits the statement's transaction without waiting for the WAL flush. A call row is a
    /// record, not a promise made to a client: losing the last fraction of a second of them in a
    /// PostgreSQL crash is acceptable (the live calls die with the node anyway), and it keeps a
    /// disk flush off the call-setup path. Duplicate ids are still refused at once.
    static let asynchronousCommit = "SELECT set_config('synchronous_commit', 'off', true)"

    private static let columns = """
        id, caller_id, caller_device, callee_id, answer_device, video, headers::text AS headers, state, \
        started_at, progressed_at, rung_at, answered_at, established_at, ended_at, end_cause, error
        """

    /// What `insert` found.
    public struct Insertion: Sendable, Equatable {
        /// False when a call with this id (in any case) already exists; nothing was written.
        public var inserted: Bool
        /// Whether the callee is an existing `_User` (checked in the same round trip).
        public var calleeExists: Bool
        /// The callee's device ids (sorted), when the store `readsCalleeDevices`.
        public var calleeDevices: [String]?

        public init(inserted: Bool, calleeExists: Bool, calleeDevices: [String]? = nil) {
            self.inserted = inserted
            self.calleeExists = calleeExists
            self.calleeDevices = calleeDevices
        }
    }

    /// Stores a new call, and checks in the same statement that its callee exists (and reads
    /// the callee's devices, when the store `readsCalleeDevices`). With `recordContact`, the
    /// statement also records that the caller reached the callee (`RealtimeSQLFunctions.addContacts`,
    /// whose presence and typing the callee may then get).
    public func insert(_ record: CallRecord, recordContact: Bool = false) async throws(PostgresError) -> Insertion {
        let devices = readsCalleeDevices
            ? ", (SELECT coalesce(json_agg(d ORDER BY d), '[]') FROM \(RealtimeSQLFunctions.userDevices)($4) d)::text AS callee_devices"
            : ""
        // Whether or not the row is new: the caller tried to reach the callee either way.
        let contact = recordContact ? ", (SELECT 1 FROM \(RealtimeSQLFunctions.addContacts)(ARRAY[$2], ARRAY[$4])) AS contact" : ""
        let rows = try await database.query("""
            WITH async AS (\(Self.asynchronousCommit)), ins AS (
                INSERT INTO calls (id, caller_id, caller_device, callee_id, answer_device, video, headers, state, node_id,
                                   started_at, progressed_at, rung_at, answered_at, established_at, ended_at, end_cause, error)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
                ON CONFLICT DO NOTHING
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM ins) = 1 AS inserted,
                   EXISTS (SELECT 1 FROM \(existingUsers)(ARRAY[$4])) AS callee_exists\(devices)\(contact)
              FROM async
            """, parameters(record, includeIdentity: true))
        let row = rows.first
        var calleeDevices: [String]?
        if readsCalleeDevices {
            guard let text = row?["callee_devices"].string, let array = try? JSONParser().parse(text).array else {
                throw .unsupported("callee_devices is not a JSON array")
            }
            calleeDevices = array.compactMap(\.string)
        }
        return Insertion(inserted: row?["inserted"].bool ?? false, calleeExists: row?["callee_exists"].bool ?? false,
                         calleeDevices: calleeDevices)
    }

    /// Rewrites the mutable part of a stored call (state, answering device, timeline, outcome).
    public func update(_ record: CallRecord) async throws(PostgresError) {
        try await database.query("""
            WITH async AS (\(Self.asynchronousCommit))
            UPDATE calls SET answer_device = $2, state = $3, progressed_at = $4, rung_at = $5, answered_at = $6,
                             established_at = $7, ended_at = $8, end_cause = $9, error = $10
              FROM async
             WHERE id = $1
            """, parameters(record, includeIdentity: false))
    }

    /// The call with this id (any case), if stored.
    public func find(_ callId: String) async throws(PostgresError) -> CallRecord? {
        let rows = try await database.query("SELECT \(Self.columns) FROM calls WHERE lower(id) = lower($1)", [.text(callId)])
        return rows.first.flatMap(Self.record)
    }

    /// A stored call and the node whose memory holds it while it is live.
    public struct Owned: Sendable {
        public var record: CallRecord
        /// The owner node's id (`RealtimeService.nodeID`); nil for rows written without one.
        public var nodeId: String?
    }

    /// The call with this id (any case) and its owner node, if stored.
    public func findOwned(_ callId: String) async throws(PostgresError) -> Owned? {
        let rows = try await database.query("SELECT \(Self.columns), node_id FROM calls WHERE lower(id) = lower($1)", [.text(callId)])
        guard let row = rows.first, let record = Self.record(row) else { return nil }
        return Owned(record: record, nodeId: row["node_id"].string)
    }

    /// `userId`'s calls as caller or callee, newest first, started before the call `before`
    /// (when given), at most `limit` (clamped to 1...maxPageSize).
    public func history(userId: String, before: String? = nil, limit: Int) async throws(PostgresError) -> [CallRecord] {
        let limit = min(max(limit, 1), Self.maxPageSize)
        let cursor = "($3::text IS NULL OR (c.started_at, c.id) < (SELECT b.started_at, b.id FROM calls b WHERE lower(b.id) = lower($3) AND (b.caller_id = $1 OR b.callee_id = $1)))"
        let rows = try await database.query("""
            SELECT * FROM (
                (SELECT \(Self.columns) FROM calls c WHERE c.caller_id = $1 AND \(cursor)
                  ORDER BY c.started_at DESC, c.id DESC LIMIT $2)
                UNION ALL
                (SELECT \(Self.columns) FROM calls c WHERE c.callee_id = $1 AND c.caller_id <> $1 AND \(cursor)
                  ORDER BY c.started_at DESC, c.id DESC LIMIT $2)
            ) h
            ORDER BY h.started_at DESC, h.id DESC
            LIMIT $2
            """, [.text(userId), .int(limit), before.map { .text($0) } ?? .null])
        return rows.compactMap(Self.record)
    }

    /// Whether a `_User` with this objectId exists.
    public func userExists(_ userId: String) async throws(PostgresError) -> Bool {
        try await database.query("SELECT u FROM \(existingUsers)(ARRAY[$1]::text[]) u", [.text(userId)]).count == 1
    }

    /// Nodes whose realtime heartbeat is more recent than `staleAfter` (`RealtimeSQLFunctions.liveNodes`).
    public func liveNodes(staleAfter: Duration) async throws(PostgresError) -> [String] {
        let rows = try await database.query("SELECT n FROM \(RealtimeSQLFunctions.liveNodes)(make_interval(secs => $1)) n",
                                            [.double(Double(staleAfter.milliseconds) / 1000)])
        return rows.compactMap { $0["n"].string }
    }

    /// Ends, as `failure`/`error`, every call still live in the table whose node is neither
    /// this one nor one of `liveNodes` (its state was in the memory of a process that is gone).
    /// Returns how many were closed.
    @discardableResult
    public func endAbandoned(liveNodes: [String], error: String = "server_restarted") async throws(PostgresError) -> Int {
        try await endAbandonedCalls(liveNodes: liveNodes, error: error).count
    }

    /// `endAbandoned`, returning the records of the calls it closed (as closed).
    public func endAbandonedCalls(liveNodes: [String], error: String) async throws(PostgresError) -> [CallRecord] {
        let rows = try await database.query("""
            UPDATE calls SET state = 'ended', ended_at = now(), end_cause = 'failure', error = $2
             WHERE state <> 'ended' AND (node_id IS NULL OR NOT (node_id = ANY ($1::text[])))
            RETURNING \(Self.columns)
            """, [.textArray(liveNodes + [nodeId]), .text(error)])
        return rows.compactMap(Self.record)
    }

    private func parameters(_ record: CallRecord, includeIdentity: Bool) -> [PostgresData] {
        func time(_ milliseconds: Int64?) -> PostgresData {
            milliseconds.map { .timestamp(milliseconds: $0) } ?? .null
        }
        let details = record.details
        let mutable: [PostgresData] = [
            record.answerDevice.map { .text($0) } ?? .null,
            .text(record.state.rawValue),
            time(details.progressedAt), time(details.rungAt), time(details.answeredAt), time(details.establishedAt), time(details.endedAt),
            details.endCause.map { .text($0.rawValue) } ?? .null,
            details.error.map { .text($0) } ?? .null,
        ]
        guard includeIdentity else { return [.text(record.callId)] + mutable }
        return [
            .text(record.callId), .text(record.caller.userId), .text(record.caller.deviceId), .text(record.calleeId),
            mutable[0], .bool(details.video), .json(JSONValue.object(record.headers).serialized()), mutable[1], .text(nodeId),
            .timestamp(milliseconds: details.startedAt),
        ] + mutable[2...]
    }

    private static func record(_ row: PostgresRow) -> CallRecord? {
        guard let callId = row["id"].string, let callerId = row["caller_id"].string, let callerDevice = row["caller_device"].string,
              let calleeId = row["callee_id"].string, let stateName = row["state"].string, let state = CallState(rawValue: stateName),
              let startedAt = row["started_at"].timestampMilliseconds
        else { return nil }
        var details = CallDetails(startedAt: startedAt, video: row["video"].bool ?? false)
        details.progressedAt = row["progressed_at"].timestampMilliseconds
        details.rungAt = row["rung_at"].timestampMilliseconds
        details.answeredAt = row["answered_at"].timestampMilliseconds
        details.establishedAt = row["established_at"].timestampMilliseconds
        details.endedAt = row["ended_at"].timestampMilliseconds
        details.endCause = row["end_cause"].string.flatMap(CallEndCause.init(rawValue:))
        details.error = row["error"].string
        let headers = row["headers"].string.flatMap { try? JSONParser().parse($0).object } ?? JSONObject()
        return CallRecord(callId: callId, caller: CallDevice(userId: callerId, deviceId: callerDevice), calleeId: calleeId,
                          answerDevice: row["answer_device"].string, headers: headers, state: state, details: details)
    }
}
