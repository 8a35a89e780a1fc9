import ParleyAccounts
import ParleyCloud
import ParleyHTTP
import ParleyJSON
import ParleyPostgres

/// Parse classes kept by the Cloud Code module.
enum CloudClassName {
    /// Background job runs (`POST /jobs/:name`), master key only.
    static let jobStatus = "_JobStatus"
}

extension ParseAPI {
    /// `/hooks/functions`, `/hooks/triggers` (master key), `/functions/:name`, `/jobs/:name`.
    func registerCloudEndpoints(on group: RouterGroup) {
        // Hooks API (Parse Server's HooksRouter; PUT {"__op":"Delete"} and DELETE both delete).
        route(.get, "/hooks/functions", on: group, ParseEndpoint(requiresMaster: true) { api, _ in
            try await api.hooksAnswer(try await api.cloudCode().hooks.functions())
        })
        route(.get, "/hooks/functions/:functionName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            let name = q.parameter("functionName")
            guard let hook = try await api.cloudCode().hooks.function(name) else { throw CloudError.noSuchFunctionHook(name) }
            return .ok(hook.json)
        })
        route(.get, "/hooks/triggers", on: group, ParseEndpoint(requiresMaster: true) { api, _ in
            try await api.hooksAnswer(try await api.cloudCode().hooks.triggers())
        })
        route(.get, "/hooks/triggers/:className/:triggerName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            let className = q.parameter("className")
            guard let hook = try await api.cloudCode().hooks.trigger(className: className, triggerName: q.parameter("triggerName")) else {
                throw CloudError.noSuchTriggerHook(className: className)
            }
            return .ok(hook.json)
        })
        for path in ["/hooks/functions", "/hooks/triggers"] {
            route(.post, path, on: group, ParseEndpoint(requiresMaster: true) { api, q in
                .ok(try await api.cloudCode().hooks.create(try Hook(declaration: q.object)).json)
            })
        }
        route(.put, "/hooks/functions/:functionName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.changeHook(q, declaration: ["functionName": .string(q.parameter("functionName"))])
        })
        route(.put, "/hooks/triggers/:className/:triggerName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.changeHook(q, declaration: ["className": .string(q.parameter("className")), "triggerName": .string(q.parameter("triggerName"))])
        })
        route(.delete, "/hooks/functions/:functionName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.cloudCode().hooks.deleteFunction(q.parameter("functionName"))
            return .empty
        })
        route(.delete, "/hooks/triggers/:className/:triggerName", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.cloudCode().hooks.deleteTrigger(className: q.parameter("className"), triggerName: q.parameter("triggerName"))
            return .empty
        })
        // Functions and jobs (Parse Server's FunctionsRouter).
        route(.post, "/functions/:functionName", on: group, ParseEndpoint { api, q in try await api.callFunction(q) })
        route(.post, "/jobs/:jobName", on: group, ParseEndpoint(requiresMaster: true) { api, q in try await api.startJob(q) })
    }

    func cloudCode() throws -> CloudCode {
        guard let cloud else { throw ParseFailure.noRoute(method: "POST", path: "/hooks") }
        return cloud
    }

    /// Parse answers a list of hooks as a bare JSON array.
    func hooksAnswer(_ hooks: [Hook]) throws -> ParseResponse {
        ParseResponse(json: .array(hooks.map { .object($0.json) }))
    }

    /// `PUT /hooks/…`: `{"__op":"Delete"}` deletes, anything else updates the URL (Parse's `handlePut`).
    func changeHook(_ request: ParseRequest, declaration: JSONObject) async throws -> ParseResponse {
        let hooks = try cloudCode().hooks
        if request.object["__op"]?.string == "Delete" {
            if let name = declaration["functionName"]?.string {
                try await hooks.deleteFunction(name)
            } else {
                try await hooks.deleteTrigger(className: declaration["className"]?.string ?? "", triggerName: declaration["triggerName"]?.string ?? "")
            }
            return .empty
        }
        var body = declaration
        guard let url = request.object["url"] else { throw CloudError.invalidHook }
        body["url"] = url
        return .ok(try await hooks.update(try Hook(declaration: body)).json)
    }

    /// `POST /functions/:name`: the webhook's `success` as `{"result": …}`.
    func callFunction(_ request: ParseRequest) async throws -> ParseResponse {
        let name = request.parameter("functionName")
        guard let cloud else { throw CloudError.invalidFunction(name) }
        var body = try await cloudRequestBase(request)
        body["params"] = .object(request.object)
        body["functionName"] = .string(name)
        let result = try await cloud.runFunction(name, body: body)
        return .ok(["result": result])
    }

    /// `POST /jobs/:name` (master key): queues the job and answers at once with its
    /// `_JobStatus` id in `X-Parse-Job-Status-Id`.
    func startJob(_ request: ParseRequest) async throws -> ParseResponse {
        let name = request.parameter("jobName")
        var body = try await cloudRequestBase(request)
        body["params"] = .object(request.object)
        body["jobName"] = .string(name)
        let id = try await cloudCode().startJob(name, params: request.object, body: body)
        return ParseResponse(body: Array("{}".utf8), headers: [("X-Parse-Job-Status-Id", id)])
    }

    /// `GET /classes/_JobStatus[/:id]` (master key): newest first; `where` may match `objectId`,
    /// `jobName` and `status` by equality.
    func findJobStatus(_ request: ParseRequest, id: String?) async throws -> ParseResponse {
        guard request.auth.isMaster else {
            throw ParseError.operationForbidden("Clients aren't allowed to perform the \(id == nil ? "find" : "get") operation on the _JobStatus collection.")
        }
        let cloud = try cloudCode()
        var filters: [String: String] = [:]
        if let text = request.value("where") {
            guard case .object(let conditions)? = try? JSONParser().parse(text) else { throw ParseError.invalidJSON("where must be a JSON object") }
            for (key, value) in conditions {
                guard ["objectId", "jobName", "status"].contains(key), let string = value.string else {
                    throw ParseError.invalidQuery("_JobStatus can be queried by objectId, jobName and status equality only")
                }
                filters[key] = string
            }
        }
        let limit = min(max(Int(request.value("limit") ?? "") ?? 100, 0), 1000)
        let skip = max(Int(request.value("skip") ?? "") ?? 0, 0)
        let rows: [JSONObject]
        do {
            rows = try await cloud.deliveries.jobs(objectId: id ?? filters["objectId"], jobName: filters["jobName"], status: filters["status"],
                                                   limit: id == nil ? limit : 1, skip: id == nil ? skip : 0)
        } catch {
            throw ParseError.internalError("\(error)")
        }
        if id != nil {
            guard let row = rows.first else { throw ParseError.objectNotFound }
            return .ok(row)
        }
        return .ok(["results": .array(rows.map { .object($0) })])
    }

    // MARK: Triggers

    /// Runs `endpoint` with the class's triggers around it: beforeSave / beforeDelete first
    /// (their error or failure rejects the request with 141; beforeSave's object replaces the
    /// body), then the write and, in the same transaction, the after* delivery, sent in the
    /// background by the worker (at least once; it never fails the request).
    func runWithTriggers(_ endpoint: ParseEndpoint, _ write: ParseWrite, _ request: ParseRequest, cloud: CloudCode) async throws -> ParseResponse {
        let className = write.className ?? request.parameter("className")
        let table = try await cloud.hooks.table()
        let isDelete = write.operation == .delete
        let before = table.url(of: isDelete ? .beforeDelete : .beforeSave, on: className)
        let after = table.url(of: isDelete ? .afterDelete : .afterSave, on: className)
        guard before != nil || after != nil else { return try await endpoint.handler(self, request) }
        let objectId: String? = write.operation == .create ? nil : request.parameter("id")
        let base = try await cloudRequestBase(request)
        let original = try await objectId.asyncMap { try await storedObject(className: className, id: $0, request) } ?? nil
        var request = request
        if let before {
            var body = base
            body["triggerName"] = .string(isDelete ? "beforeDelete" : "beforeSave")
            if isDelete {
                // Nothing to delete (or not visible): the write itself answers 101.
                if let original { body["object"] = .object(original) }
            } else {
                body["object"] = .object(Self.objectToSave(className: className, objectId: objectId, original: original, body: request.object))
                if let original { body["original"] = .object(original) }
            }
            if !isDelete || original != nil {
                let answer = try await cloud.caller.call(before, body: body)
                if !isDelete, case .object(let changed) = answer {
                    request.body = Self.bodyFromTrigger(changed, request: request.object, original: original)
                }
            }
        }
        guard let after else { return try await endpoint.handler(self, request) }
        let afterName = isDelete ? "afterDelete" : "afterSave"
        let response: ParseResponse
        if request.db is PostgresTransaction {
            response = try await writeAndQueue(endpoint, request, className: className, objectId: objectId, original: original, base: base,
                                               trigger: afterName, url: after)
        } else {
            let prepared = request
            response = try await accounts.transaction { tx in
                var inner = prepared
                inner.db = tx
                return try await self.writeAndQueue(endpoint, inner, className: className, objectId: objectId, original: original, base: base,
                                                    trigger: afterName, url: after)
            }
        }
        cloud.worker.wake()
        return response
    }

    /// The write, then its after* delivery on the same executor (the request's transaction).
    private func writeAndQueue(_ endpoint: ParseEndpoint, _ request: ParseRequest, className: String, objectId: String?, original: JSONObject?,
                               base: JSONObject, trigger: String, url: String) async throws -> ParseResponse {
        let response = try await endpoint.handler(self, request)
        var body = base
        body["triggerName"] = .string(trigger)
        if trigger == "afterDelete" {
            if let original { body["object"] = .object(original) }
        } else {
            let id = objectId ?? ((try? JSONParser().parse(response.body))?["objectId"]?.string ?? "")
            if let saved = try await storedObject(className: className, id: id, request) { body["object"] = .object(saved) }
            if let original { body["original"] = .object(original) }
        }
        let statement = DeliveryStore.enqueueTrigger(url: url, body: body)
        _ = try await request.db.query(statement.sql, statement.params)
        return response
    }

    /// Runs a find or get with the class's beforeFind (its error rejects the read with 141) and
    /// afterFind (it sees the objects and its `success` array replaces them; its error fails the
    /// read with 141), as Parse Server's query triggers.
    func runWithFindTriggers(_ endpoint: ParseEndpoint, _ read: ParseRead, _ request: ParseRequest, cloud: CloudCode) async throws -> ParseResponse {
        let className = read.className ?? request.parameter("className")
        let table = try await cloud.hooks.table()
        let before = table.url(of: .beforeFind, on: className)
        let after = table.url(of: .afterFind, on: className)
        guard before != nil || after != nil else { return try await endpoint.handler(self, request) }
        var base = try await cloudRequestBase(request)
        base["query"] = .object(Self.queryJSON(request, className: className, id: read.operation == .get ? request.parameter("id") : nil))
        base["count"] = .bool(request.value("count").map { $0 == "1" || $0 == "true" } ?? false)
        base["isGet"] = .bool(read.operation == .get)
        if let before {
            var body = base
            body["triggerName"] = "beforeFind"
            _ = try await cloud.caller.call(before, body: body)
        }
        var response = try await endpoint.handler(self, request)
        guard let after else { return response }
        // The trigger rewrites the objects: the answer is read whole, within the answer limit.
        response = try await response.collected(upTo: configuration.maxAnswerBytes)
        guard case .object(var answer)? = try? JSONParser().parse(response.body) else { return response }
        let objects: [JSONValue] = read.operation == .get ? [.object(answer)] : (answer["results"]?.array ?? [])
        var body = base
        body["triggerName"] = "afterFind"
        body["objects"] = .array(objects.map { object in
            guard case .object(var fields) = object else { return object }
            fields["className"] = .string(className)
            return .object(fields)
        })
        let result = try await cloud.caller.call(after, body: body)
        guard case .array(let rewritten) = result else { return response }
        let cleaned: [JSONValue] = rewritten.map { object in
            guard case .object(var fields) = object else { return object }
            fields.removeValue(forKey: "className")
            fields.removeValue(forKey: "__type")
            return .object(fields)
        }
        if read.operation == .get {
            guard case .object(let object)? = cleaned.first else { throw ParseError.objectNotFound }
            return ParseResponse(status: response.status, json: .object(object), headers: response.headers)
        }
        answer["results"] = .array(cleaned)
        return ParseResponse(status: response.status, json: .object(answer), headers: response.headers)
    }

    /// The query as Parse's `Parse.Query.toJSON` shows it to a trigger: `where` (a get adds its
    /// `objectId`), `limit`, `skip`, `order`, `keys`, `include`, with `className`.
    static func queryJSON(_ request: ParseRequest, className: String, id: String?) -> JSONObject {
        var query: JSONObject = ["className": .string(className)]
        var condition = JSONObject()
        if request.bodyIsQuery, case .object(let parsed)? = request.object["where"] {
            condition = parsed
        } else if let text = request.value("where"), case .object(let parsed)? = try? JSONParser().parse(text) {
            condition = parsed
        }
        if let id { condition["objectId"] = .string(id) }
        query["where"] = .object(condition)
        for name in ["limit", "skip"] {
            if let text = request.value(name), let number = Int64(text) { query[name] = .int(number) }
        }
        for name in ["order", "keys", "include"] {
            if let text = request.value(name) { query[name] = .string(text) }
        }
        return query
    }

    /// beforeLogin: the webhook sees the user whose password was just verified (`object`); its
    /// error fails the login with 141, before any session exists.
    func runBeforeLogin(_ url: String, userId: String, _ request: ParseRequest) async throws(ParseError) {
        do {
            var body = try await cloudRequestBase(request)
            body["triggerName"] = "beforeLogin"
            if let user = try await storedObject(className: ClassName.user, id: userId, request) { body["object"] = .object(user) }
            _ = try await cloudCode().caller.call(url, body: body)
        } catch {
            throw ParseError(ParseFailure(error))
        }
    }

    /// afterLogin: queued once the session exists, with the user as `object` and `user`.
    func queueAfterLogin(_ url: String, user: [UInt8], _ request: ParseRequest) async throws {
        guard case .object(var object)? = try? JSONParser().parse(user) else { return }
        object.removeValue(forKey: "sessionToken")
        object["className"] = .string(ClassName.user)
        var body = try await cloudRequestBase(request)
        body["triggerName"] = "afterLogin"
        body["object"] = .object(object)
        body["user"] = .object(object)
        let statement = DeliveryStore.enqueueTrigger(url: url, body: body)
        _ = try await request.db.query(statement.sql, statement.params)
        cloud?.worker.wake()
    }

    /// The members every webhook request carries: `master`, `user` (with a session),
    /// `installationId`, `headers` (lower-cased names), `ip`, `context`.
    func cloudRequestBase(_ request: ParseRequest) async throws -> JSONObject {
        var body: JSONObject = ["master": .bool(request.auth.isMaster)]
        if let session = request.auth.user, case .object(let user)? = try? JSONParser().parse(try await accounts.users.me(session: session, on: request.db)) {
            body["user"] = .object(user)
        }
        if let installationId = request.auth.installationId { body["installationId"] = .string(installationId) }
        var headers = JSONObject()
        for (name, value) in request.headers {
            let lower = name.lowercased()
            if lower == "x-parse-master-key" { continue }
            headers[lower] = .string(value)
        }
        body["headers"] = .object(headers)
        body["ip"] = .string(request.clientAddress)
        var context = JSONObject()
        if let text = request.headers["X-Parse-Cloud-Context"], case .object(let object)? = try? JSONParser().parse(text) { context = object }
        body["context"] = .object(context)
        return body
    }

    /// The stored object as a webhook sees it (any ACL: the trigger runs as the server), with
    /// `className`; nil when there is none.
    private func storedObject(className: String, id: String, _ request: ParseRequest) async throws -> JSONObject? {
        var asServer = request
        asServer.auth = .master
        asServer.query = []
        asServer.bodyIsQuery = false
        let response: ParseResponse
        do {
            response = try await getObject(asServer, className: className, id: id)
        } catch let error as ParseError where error.code == 101 {
            return nil
        }
        guard case .object(var object)? = try? JSONParser().parse(response.body) else { return nil }
        object["className"] = .string(className)
        object.removeValue(forKey: "sessionToken")
        return object
    }

    /// beforeSave's `object`: the body (create), or the original with the body applied (update;
    /// `Delete` and numeric `Increment` applied, other operations shown as sent). No password.
    static func objectToSave(className: String, objectId: String?, original: JSONObject?, body: JSONObject) -> JSONObject {
        var object = original ?? JSONObject()
        for (key, value) in body where key != "password" {
            if let op = value["__op"]?.string {
                switch op {
                case "Delete":
                    object.removeValue(forKey: key)
                    continue
                case "Increment":
                    if let amount = value["amount"], let sum = Self.add(object[key] ?? .int(0), amount) {
                        object[key] = sum
                        continue
                    }
                default: break
                }
            }
            object[key] = value
        }
        object["className"] = .string(className)
        if let objectId { object["objectId"] = .string(objectId) }
        return object
    }

    private static func add(_ lhs: JSONValue, _ rhs: JSONValue) -> JSONValue? {
        switch (lhs, rhs) {
        case (.int(let a), .int(let b)): let (sum, overflow) = a.addingReportingOverflow(b); return overflow ? nil : .int(sum)
        case (.int, _), (.double, _): if let a = lhs.double, let b = rhs.double { return .double(a + b) }; return nil
        default: return nil
        }
    }

    /// The body to write after beforeSave answered `changed`: its members without the server's
    /// (`createdAt`, `updatedAt`, `className`, `objectId`); for an update only those that differ
    /// from `original` (and the request's `Delete` operations the webhook left out); plus the
    /// request's `password` and `authData`, which the webhook never saw.
    static func bodyFromTrigger(_ changed: JSONObject, request: JSONObject, original: JSONObject?) -> JSONObject {
        var body = JSONObject()
        for (key, value) in changed where !["createdAt", "updatedAt", "className", "objectId"].contains(key) {
            if let original, original[key] == value, request[key] == nil { continue }
            body[key] = value
        }
        for (key, value) in request where body[key] == nil && changed[key] == nil {
            if key == "password" || key == "authData" || value["__op"]?.string == "Delete" { body[key] = value }
        }
        return body
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
