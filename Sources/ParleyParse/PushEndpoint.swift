import ParleyAccounts
import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyPostgres

/// Parse classes kept by the push module.
enum PushClassName {
    static let pushStatus = "_PushStatus"
}

extension ParseAPI {
    /// `POST /push` (master key; Parse Server's PushRouter): records the push (`_PushStatus`)
    /// and answers `{"result":true}` with `X-Parse-Push-Status-Id` at once; the installations
    /// it matches are then queued as push jobs page by page (`queuePush`), each page in its own
    /// transaction, so no push is one transaction or held in memory. At most `pagers` pushes
    /// page at once per node: one over the cap is recorded unleased and waits (`pending`) until
    /// a pager on any node claims it.
    func sendPush(_ request: ParseRequest) async throws -> ParseResponse {
        guard let settings = configuration.push else { throw ParseError.pushMisconfigured("Missing push configuration") }
        let body = request.object
        let condition: JSONValue
        switch (body["where"], body["channels"]) {
        case (.some, .some):
            throw ParseError.pushMisconfigured("Channels and query can not be set at the same time.")
        case (.some(let value), nil):
            switch value {
            case .object: condition = value
            case .string(let text):
                guard case .object? = try? JSONParser().parse(text) else { throw ParseError.invalidQuery("where must be a JSON object") }
                condition = try JSONParser().parse(text)
            default: throw ParseError.invalidQuery("where must be a JSON object")
            }
        case (nil, .some(let value)):
            guard let channels = value.array, channels.allSatisfy({ $0.string != nil }) else {
                throw ParseError.pushMisconfigured("channels must be an array of strings")
            }
            condition = ["channels": ["$in": .array(channels)]]
        case (nil, nil):
            throw ParseError.pushMisconfigured("Sending a push requires either \"channels\" or a \"where\" query.")
        }
        guard case .object(let data)? = body["data"] else { throw ParseError.pushMisconfigured("Missing push data: data must be an object.") }
        _ = try Self.badgeChange(data)
        let now = UTCTime.nowMilliseconds()
        var pushTime: Int64?
        if let value = body["push_time"], !value.isNull {
            guard let time = Self.time(value) else { throw ParseError.pushMisconfigured("\(value.serialized()) is not a valid time.") }
            pushTime = time
        }
        var expiresAt: Int64?
        var interval: Int64?
        switch (body["expiration_time"], body["expiration_interval"]) {
        case (.some(let time), .some(let span)) where !time.isNull && !span.isNull:
            throw ParseError.pushMisconfigured("Both expiration_time and expiration_interval cannot be set")
        case (.some(let time), _) where !time.isNull:
            guard let value = Self.time(time) else { throw ParseError.pushMisconfigured("expiration_time must be a valid date.") }
            expiresAt = value
        case (_, .some(let span)) where !span.isNull:
            guard let seconds = span.double, seconds > 0, seconds < 1e10 else {
                throw ParseError.pushMisconfigured("expiration_interval must be a number greater than 0")
            }
            interval = Int64(seconds)
            expiresAt = (pushTime ?? now) + Int64(seconds * 1000)
        default: break
        }
        // The query is compiled now so a bad `where` fails this request, not the background pages.
        _ = try await accounts.installations.pushPage(where: condition, after: nil, limit: 0, badge: .none, on: request.db).count
        let id = RandomID.objectID()
        let paging = settings.pagers.tryEnter()
        do {
            try await Self.sql(request.db, "SELECT push_create_parse($1, $2, $3, $4, $5, $6, $7)", [
                .text(id), .json(condition.serialized()), .json(JSONValue.object(data).serialized()),
                pushTime.map { .timestamp(milliseconds: $0) } ?? .null, expiresAt.map { .timestamp(milliseconds: $0) } ?? .null,
                interval.map { .int(Int($0)) } ?? .null, .int(paging ? Int(settings.lease.wholeMilliseconds) : 0),
            ])
        } catch {
            if paging { settings.pagers.leave() }
            throw error
        }
        if paging {
            let pages = Task { [self] in
                await queuePush(id, where: condition, payload: data, cursor: nil, settings: settings)
                await pageClaimedPushes(settings)
                settings.pagers.leave()
            }
            _ = pages
        } else {
            logger.notice("push waits for a paging slot", [("push", id), ("pagers", "\(settings.pagers.maxConcurrent)")])
        }
        return ParseResponse(json: ["result": true], headers: [("X-Parse-Push-Status-Id", id)])
    }

    /// Queues push `id` from `cursor` on, one page per transaction, renewing its lease; stops on
    /// a failure (the lease then expires and `resumePushes` on some node carries on).
    func queuePush(_ id: String, where condition: JSONValue, payload: JSONObject, cursor start: String?, settings: ParsePushSettings) async {
        var cursor = start
        let badge = (try? Self.badgeChange(payload)) ?? .none
        while true {
            do {
                let after = cursor
                let (last, done) = try await accounts.transaction { tx -> (String?, Bool) in
                    let page = try await self.accounts.installations.pushPage(where: condition, after: after, limit: settings.pageSize, badge: badge, on: tx)
                    let targets: [JSONValue] = page.compactMap { target in
                        guard let token = target.token, !token.isEmpty, let platform = Self.platform(target.deviceType) else { return nil }
                        var item: JSONObject = ["installationId": .string(target.installationId), "platform": .int(platform), "token": .string(token)]
                        if let user = target.userId { item["userId"] = .string(user) }
                        if let value = target.badge { item["badge"] = .int(value) }
                        return .object(item)
                    }
                    let done = page.count < settings.pageSize
                    let next = page.last?.objectId ?? after
                    _ = try await tx.query("SELECT push_enqueue_parse($1, $2, $3, $4, $5)", [
                        .text(id), .json(JSONValue.array(targets).serialized()), next.map { .text($0) } ?? .null, .bool(done),
                        .int(Int(settings.lease.wholeMilliseconds)),
                    ])
                    return (next, done)
                }
                settings.queued()
                cursor = last
                if done { return }
            } catch {
                logger.error("queueing a push page failed; another node resumes it when its lease expires", [("push", id), ("error", "\(error)")])
                return
            }
        }
    }

    /// Pages the pushes waiting for a slot (over the cap) or left unqueued by a stopped node
    /// (expired lease), holding one paging slot, until none is left; nothing when every slot is
    /// taken (their holders carry on with the waiting pushes). Call at start and periodically.
    public func resumePushes() async {
        guard let settings = configuration.push, settings.pagers.tryEnter() else { return }
        await pageClaimedPushes(settings)
        settings.pagers.leave()
    }

    /// Claims waiting pushes one at a time and queues their pages, until none is left.
    private func pageClaimedPushes(_ settings: ParsePushSettings) async {
        while true {
            let rows: PostgresRows
            do {
                rows = try await accounts.database.query("SELECT object_id, query::text AS query, payload::text AS payload, cursor FROM push_claim_parse($1)",
                                                         [.int(Int(settings.lease.wholeMilliseconds))])
            } catch {
                logger.warning("claiming an unfinished push failed", [("error", "\(error)")])
                return
            }
            guard let row = rows.first, let id = row["object_id"].string, let query = row["query"].string.flatMap({ try? JSONParser().parse($0) }),
                  case .object(let payload)? = row["payload"].string.flatMap({ try? JSONParser().parse($0) }) else { return }
            logger.notice("paging a waiting push", [("push", id), ("cursor", row["cursor"].string ?? "")])
            await queuePush(id, where: query, payload: payload, cursor: row["cursor"].string, settings: settings)
        }
    }

    /// `GET /classes/_PushStatus[/:id]` (master key only): newest first; `where` may match
    /// `objectId` and `status` by equality.
    func findPushStatus(_ request: ParseRequest, id: String?) async throws -> ParseResponse {
        guard request.auth.isMaster else {
            throw ParseError.operationForbidden("Clients aren't allowed to perform the \(id == nil ? "find" : "get") operation on the _PushStatus collection.")
        }
        var params: [PostgresData] = []
        var conditions: [String] = []
        if let id {
            params.append(.text(id))
            conditions.append("object_id = $1")
        }
        if let text = request.value("where") {
            guard case .object(let filters)? = try? JSONParser().parse(text) else { throw ParseError.invalidJSON("where must be a JSON object") }
            for (key, value) in filters {
                guard let string = value.string, let column = ["objectId": "object_id", "status": "status"][key] else {
                    throw ParseError.invalidQuery("_PushStatus can be queried by objectId and status equality only")
                }
                params.append(.text(string))
                conditions.append("\(column) = $\(params.count)")
            }
        }
        let limit = min(max(Int(request.value("limit") ?? "") ?? 100, 0), 1000)
        let skip = max(Int(request.value("skip") ?? "") ?? 0, 0)
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let rows = try await Self.sql(request.db, """
            SELECT object_id, query::text AS query, payload::text AS payload, source, status, num_sent, num_failed, num_queued, error_message,
                   to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created,
                   to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS updated,
                   to_char(coalesce(push_time, created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS push_time,
                   (extract(epoch FROM expires_at) * 1000)::bigint AS expiry, expiration_interval
              FROM push_status_view\(filter) ORDER BY created_at DESC, object_id LIMIT \(limit) OFFSET \(skip)
            """, params)
        let objects: [JSONObject] = rows.map { row in
            var object: JSONObject = [
                "objectId": .string(row["object_id"].string ?? ""), "createdAt": .string(row["created"].string ?? ""),
                "updatedAt": .string(row["updated"].string ?? ""), "pushTime": .string(row["push_time"].string ?? ""),
                "query": .string(row["query"].string ?? "{}"), "payload": .string(row["payload"].string ?? "{}"),
                "source": .string(row["source"].string ?? "rest"), "status": .string(row["status"].string ?? ""),
                "numSent": .int(Int64(row["num_sent"].int ?? 0)), "numFailed": .int(Int64(row["num_failed"].int ?? 0)),
                "count": .int(Int64(row["num_queued"].int ?? 0)),
            ]
            if let expiry = row["expiry"].int { object["expiry"] = .int(Int64(expiry)) }
            if let interval = row["expiration_interval"].int { object["expiration_interval"] = .int(Int64(interval)) }
            if let message = row["error_message"].string { object["errorMessage"] = .string(message) }
            return object
        }
        if id != nil {
            guard let object = objects.first else { throw ParseError.objectNotFound }
            return .ok(object)
        }
        return .ok(["results": .array(objects.map { .object($0) })])
    }

    /// A statement of the push API; a database failure is an internal error (logged).
    @discardableResult
    static func sql(_ db: any SQLExecutor, _ text: String, _ params: [PostgresData]) async throws(ParseError) -> PostgresRows {
        do {
            return try await db.query(text, params)
        } catch {
            throw ParseError.internalError("\(error)")
        }
    }

    /// `badge`: `"Increment"` or `{"__op":"Increment","amount":n}` adds to each iOS
    /// installation's badge; a number sets it.
    static func badgeChange(_ data: JSONObject) throws(ParseError) -> InstallationStore.BadgeChange {
        guard let badge = data["badge"], !badge.isNull else { return .none }
        if let text = badge.string {
            guard text.lowercased() == "increment" else { throw ParseError.pushMisconfigured("badge must be a number or \"Increment\"") }
            return .increment(1)
        }
        if let number = badge.int { return .set(number) }
        if badge["__op"]?.string == "Increment", let amount = badge["amount"]?.int { return .increment(amount) }
        throw ParseError.pushMisconfigured("badge must be a number or \"Increment\"")
    }

    /// A push time: an ISO-8601 string (UTC when it has no offset) or seconds since the epoch.
    static func time(_ value: JSONValue) -> Int64? {
        if let text = value.string { return UTCTime.parseTimestamp(text) }
        if case .object(let object) = value, object["__type"]?.string == "Date", let iso = object["iso"]?.string { return UTCTime.parseTimestamp(iso) }
        if let seconds = value.double, seconds > 0, seconds < 1e11 { return Int64(seconds * 1000) }
        return nil
    }

    /// gorush's platform of a Parse `deviceType` (nil: not pushable).
    static func platform(_ deviceType: String?) -> Int64? {
        switch deviceType {
        case "ios", "osx", "tvos", "watchos": 1
        case "android": 2
        default: nil
        }
    }
}
