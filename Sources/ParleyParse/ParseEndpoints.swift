import ParleyAccounts
import ParleyHTTP
import ParleyJSON

extension ParseAPI {
    /// The Parse Server version whose REST API Parley follows, as `serverInfo` reports it.
    static let parseServerVersion = "8.0.0"

    /// Every endpoint, in Parse Server's paths: the API's one routing table.
    func registerEndpoints(on group: RouterGroup) {
        let meInline: HTTPInlineAttempt = { [self] request, respond in
            guard let response = cachedMe(request) else { return false }
            respond(response)
            return true
        }
        // Users.
        route(.post, "/users", on: group, ParseEndpoint(classTarget: Self.target(ClassName.user, .create)) { api, q in try await api.signUp(q) }.writing(.create, ClassName.user))
        route(.get, "/users", on: group, inline: { [self] request, respond in answerFind(request, className: ClassName.user, respond: respond) },
              ParseEndpoint(classTarget: Self.findTarget(ClassName.user)) { api, q in try await api.find(q, className: ClassName.user) }.reading(.find, ClassName.user))
        route(.get, "/users/me", on: group, inline: meInline, ParseEndpoint { api, q in try await api.me(q) })
        route(.get, "/users/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.user, .get)) { api, q in
            try await api.getUser(q, id: q.parameter("id"))
        }.reading(.get, ClassName.user))
        route(.put, "/users/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.user, .update)) { api, q in
            try await api.updateUser(q, id: q.parameter("id"))
        }.writing(.update, ClassName.user))
        route(.delete, "/users/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.user, .delete)) { api, q in
            try await api.deleteUser(q, id: q.parameter("id"))
        }.writing(.delete, ClassName.user))
        route(.get, "/login", on: group, ParseEndpoint(readsSession: false) { api, q in try await api.logIn(q) })
        route(.post, "/login", on: group, ParseEndpoint(readsSession: false) { api, q in try await api.logIn(q) })
        route(.post, "/logout", on: group, ParseEndpoint { api, q in try await api.logOut(q) })
        // Sessions.
        route(.get, "/sessions/me", on: group, ParseEndpoint { api, q in try await api.sessionMe(q) })
        route(.get, "/sessions", on: group, ParseEndpoint { api, q in try await api.listSessions(q) })
        route(.get, "/sessions/:id", on: group, ParseEndpoint { api, q in try await api.getSession(q, id: q.parameter("id")) })
        route(.delete, "/sessions/:id", on: group, ParseEndpoint { api, q in try await api.deleteSession(q, id: q.parameter("id")) })
        // Installations.
        route(.post, "/installations", on: group, ParseEndpoint(classTarget: Self.target(ClassName.installation, .create)) { api, q in try await api.saveInstallation(q) })
        route(.get, "/installations", on: group, ParseEndpoint { api, q in try await api.findInstallations(q) })
        route(.get, "/installations/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.installation, .get)) { api, q in try await api.getInstallation(q, id: q.parameter("id")) })
        route(.put, "/installations/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.installation, .update)) { api, q in try await api.updateInstallation(q, id: q.parameter("id")) })
        route(.delete, "/installations/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.installation, .delete)) { api, q in try await api.deleteInstallation(q, id: q.parameter("id")) })
        // Roles (the same as /classes/_Role).
        route(.post, "/roles", on: group, ParseEndpoint(classTarget: Self.target(ClassName.role, .create)) { api, q in
            try await api.createObject(q, className: ClassName.role)
        }.writing(.create, ClassName.role))
        route(.get, "/roles", on: group, ParseEndpoint(classTarget: Self.findTarget(ClassName.role)) { api, q in
            try await api.findObjects(q, className: ClassName.role)
        }.reading(.find, ClassName.role))
        route(.get, "/roles/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.role, .get)) { api, q in
            try await api.getObject(q, className: ClassName.role, id: q.parameter("id"))
        }.reading(.get, ClassName.role))
        route(.put, "/roles/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.role, .update)) { api, q in
            try await api.updateObject(q, className: ClassName.role, id: q.parameter("id"))
        }.writing(.update, ClassName.role))
        route(.delete, "/roles/:id", on: group, ParseEndpoint(classTarget: Self.target(ClassName.role, .delete)) { api, q in
            try await api.deleteObject(q, className: ClassName.role, id: q.parameter("id"))
        }.writing(.delete, ClassName.role))
        // Classes (system classes go to their own endpoints).
        route(.post, "/classes/:className", on: group, ParseEndpoint(classTarget: Self.classTarget(.create)) { api, q in
            try await api.createObject(q, className: q.parameter("className"))
        }.writing(.create))
        route(.get, "/classes/:className", on: group,
              inline: { [self] request, respond in answerFind(request, className: request.parameters["className"] ?? "", respond: respond) },
              ParseEndpoint(classTarget: Self.classFindTarget) { api, q in try await api.findObjects(q, className: q.parameter("className")) }.reading(.find))
        route(.get, "/classes/:className/:id", on: group,
              ParseEndpoint(classTarget: Self.classTarget(.get)) { api, q in
                  try await api.getObject(q, className: q.parameter("className"), id: q.parameter("id"))
              }.reading(.get))
        route(.put, "/classes/:className/:id", on: group,
              ParseEndpoint(classTarget: Self.classTarget(.update)) { api, q in
                  try await api.updateObject(q, className: q.parameter("className"), id: q.parameter("id"))
              }.writing(.update))
        route(.delete, "/classes/:className/:id", on: group,
              ParseEndpoint(classTarget: Self.classTarget(.delete)) { api, q in
                  try await api.deleteObject(q, className: q.parameter("className"), id: q.parameter("id"))
              }.writing(.delete))
        // Schemas (master key).
        route(.get, "/schemas", on: group, ParseEndpoint(requiresMaster: true) { api, q in .ok(try await api.accounts.schemaEditor.list(on: q.db)) })
        route(.get, "/schemas/:className", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            .ok(try await api.accounts.schemaEditor.get(q.parameter("className"), on: q.db))
        })
        route(.post, "/schemas", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            .ok(try await api.accounts.schemaEditor.create(pathClassName: nil, body: q.object))
        })
        route(.post, "/schemas/:className", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            .ok(try await api.accounts.schemaEditor.create(pathClassName: q.parameter("className"), body: q.object))
        })
        route(.put, "/schemas/:className", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            .ok(try await api.accounts.schemaEditor.update(q.parameter("className"), body: q.object))
        })
        route(.delete, "/schemas/:className", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.accounts.schemaEditor.delete(q.parameter("className"))
            return .ok([:])
        })
        // Email verification and password reset, and their pages.
        registerAccountEmails(on: group)
        // Batch.
        route(.post, "/batch", on: group, ParseEndpoint { api, q in try await api.batch(q) })
        // Config.
        route(.get, "/aggregate/:className", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            let parameters: [(name: String, value: JSONValue)] = q.bodyIsQuery ? q.object.map { ($0.key, $0.value) } : q.query.map { ($0.name, .string($0.value)) }
            let query: AggregateQuery
            do throws(QueryError) {
                query = try AggregateQuery.fromParameters(className: q.parameter("className"), parameters)
            } catch {
                throw ParseError(error)
            }
            return .ok(try await api.queries.aggregate(query, on: q.db))
        })
        route(.get, "/config", on: group, ParseEndpoint { api, q in .ok(try await api.accounts.config.get(auth: q.auth, on: q.db)) })
        route(.put, "/config", on: group, ParseEndpoint(requiresMaster: true) { api, q in
            try await api.accounts.config.update(body: q.object, events: api.accounts.events, on: q.db)
            return .ok(["result": true])
        })
        // Cloud Code.
        if cloud != nil { registerCloudEndpoints(on: group) }
        // Push.
        route(.post, "/push", on: group, ParseEndpoint(requiresMaster: true) { api, q in try await api.sendPush(q) })
        registerFileEndpoints(on: group)
        // Server.
        route(.get, "/serverInfo", on: group, ParseEndpoint(requiresMaster: true) { api, _ in api.serverInfo() })
        // Parse Server answers its health check without keys, for any method; with the API at
        // the root the server's own `/health` already answers.
        if configuration.mountPath != "/" {
            let healthy = render(.ok(["status": "ok"]), method: .get)
            group.constant(.get, "/health", response: healthy)
            group.constant(.post, "/health", response: healthy)
        }
    }

    // MARK: Class-level permissions targets

    /// `operation` on a fixed class.
    static func target(_ className: String, _ operation: ClassOperation) -> ParseEndpoint.ClassTarget {
        { _ in (className, [operation]) }
    }

    /// A find on a fixed class: `find`, plus `count` when counted (only `count` with `limit=0`,
    /// as Parse Server runs no find then).
    static func findTarget(_ className: String) -> ParseEndpoint.ClassTarget {
        { q in (className, findOperations(q)) }
    }

    static func findOperations(_ q: ParseRequest) -> [ClassOperation] {
        guard q.counts else { return [.find] }
        return q.value("limit") == "0" ? [.count] : [.find, .count]
    }

    /// `operation` on `/classes/:className` (`_Session` has rules of its own).
    static func classTarget(_ operation: ClassOperation) -> ParseEndpoint.ClassTarget {
        { q in
            let className = q.parameter("className")
            return className == ClassName.session ? nil : (className, [operation])
        }
    }

    /// A find on `/classes/:className`.
    static let classFindTarget: ParseEndpoint.ClassTarget = { q in
        let className = q.parameter("className")
        return className == ClassName.session ? nil : (className, findOperations(q))
    }

    // MARK: Users

    func signUp(_ request: ParseRequest) async throws -> ParseResponse {
        let result = try await accounts.users.signUp(body: request.object, auth: request.auth, on: request.db)
        let location = [("Location", "\(request.baseURL)/users/\(result.objectId)")]
        if result.needsVerification { await sendVerification(userId: result.objectId, logger: logger) }
        // authData of an existing user logs it in: 200 with the user, as Parse Server.
        if let user = result.loggedIn { return ParseResponse(status: .ok, body: user, headers: location) }
        return ParseResponse(status: .created, json: .object(result.json), headers: location)
    }

    func logIn(_ request: ParseRequest) async throws -> ParseResponse {
        // Parse reads credentials from the body, or from the query string when the body has none.
        var username = request.body?["username"]?.string
        var email = request.body?["email"]?.string
        var password = request.body?["password"]?.string
        if username == nil && email == nil {
            username = request.query.first { $0.name == "username" }?.value
            email = request.query.first { $0.name == "email" }?.value
            password = password ?? request.query.first { $0.name == "password" }?.value
        }
        for key in ["username", "email", "password"] {
            if let value = request.body?[key], !value.isNull, value.string == nil { throw ParseError.invalidLogin }
        }
        let attempt = try configuration.loginThrottle.begin(account: username ?? email, address: request.clientAddress)
        do {
            let table = try await cloud?.hooks.table()
            var before: (@Sendable (String) async throws(ParseError) -> Void)?
            if let url = table?.url(of: .beforeLogin, on: ClassName.user) {
                before = { [self] (userId: String) async throws(ParseError) -> Void in try await runBeforeLogin(url, userId: userId, request) }
            }
            let user = try await accounts.users.logIn(username: username, email: email, password: password,
                                                      installationId: request.auth.installationId, beforeSession: before, on: request.db)
            configuration.loginThrottle.succeeded(attempt)
            if let url = table?.url(of: .afterLogin, on: ClassName.user) { try await queueAfterLogin(url, user: user, request) }
            return .ok(user)
        } catch let error as ParseError where error.code == ParseError.invalidLogin.code {
            throw error
        } catch {
            configuration.loginThrottle.cancelled(attempt)
            throw error
        }
    }

    func logOut(_ request: ParseRequest) async throws -> ParseResponse {
        if let token = request.sessionToken {
            try await accounts.sessions.revoke(token: token, on: request.db)
        }
        return .empty
    }

    func me(_ request: ParseRequest) async throws -> ParseResponse {
        guard let session = request.auth.user else { throw ParseError.invalidSession }
        let shape = try request.fetchShape(onlyShape: true)
        return .ok(try await queries.shape(try await accounts.users.me(session: session, on: request.db), shape: shape, auth: request.auth, on: request.db))
    }

    func getUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let shape = try request.fetchShape()
        let relations = try await accounts.schemas.relationFields(className: ClassName.user, on: request.db)
        let user = try await accounts.users.get(objectId: id, auth: request.auth, hidden: request.access.protectedFields,
                                                userFields: request.access.userFieldProtections,
                                                pointerFields: request.access.pointerFields, keys: shape.topLevelKeys, relations: relations, on: request.db)
        return .ok(try await queries.shape(user, shape: shape, auth: request.auth, on: request.db))
    }

    func updateUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let (users, auth, pointerFields) = (accounts.users, request.auth, request.access.pointerFields)
        let answer = try await accounts.relations.write(systemClass: ClassName.user, owner: id, body: request.object, on: request.db) { body, db throws(ParseError) in
            try await users.update(objectId: id, body: body, auth: auth, pointerFields: pointerFields, on: db)
        }
        if accounts.configuration.verifyUserEmails, request.object["email"]?.string != nil { await sendVerification(userId: id, logger: logger) }
        return .ok(answer)
    }

    func deleteUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let (users, auth, pointerFields) = (accounts.users, request.auth, request.access.pointerFields)
        try await accounts.relations.delete(systemClass: ClassName.user, objectId: id, on: request.db) { db throws(ParseError) in
            try await users.delete(objectId: id, auth: auth, pointerFields: pointerFields, on: db)
        }
        return .empty
    }

    /// A find of any class: the one find of the full path (the inline one is `answerFind`).
    func find(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        ParseResponse(answer: try await queries.findAnswer(try request.parseQuery(className: className), auth: request.auth, access: request.access, on: request.db))
    }

    // MARK: Sessions

    func sessionMe(_ request: ParseRequest) async throws -> ParseResponse {
        guard let token = request.sessionToken else { throw ParseError.invalidSessionToken("Session token required.") }
        guard request.auth.user != nil || request.auth.isMaster else { throw ParseError.invalidSession }
        return .ok(try await accounts.sessions.get(token: token, on: request.db))
    }

    func listSessions(_ request: ParseRequest) async throws -> ParseResponse {
        guard request.auth.isMaster || request.auth.user != nil else { throw ParseError.invalidSessionToken("Session token required.") }
        if !request.auth.isMaster || request.value("where") != nil {
            return try await find(request, className: ClassName.session)
        }
        let query = try request.parseQuery(className: ClassName.session)
        return .ok(try await accounts.sessions.list(userId: nil, limit: query.limit, skip: query.skip, on: request.db))
    }

    func getSession(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let shape = try request.fetchShape()
        let session = try await accounts.sessions.get(sessionId: id, auth: request.auth, keys: shape.topLevelKeys, on: request.db)
        return .ok(try await queries.shape(session, shape: shape, auth: request.auth, on: request.db))
    }

    func deleteSession(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        try await accounts.sessions.revoke(sessionId: id, auth: request.auth, on: request.db)
        return .empty
    }

    // MARK: Installations

    func saveInstallation(_ request: ParseRequest) async throws -> ParseResponse {
        let result = try await accounts.installations.save(body: request.object, auth: request.auth, on: request.db)
        guard result.created else { return .ok(result.json) }
        let id = result.json["objectId"]?.string ?? ""
        return ParseResponse(status: .created, json: .object(result.json), headers: [("Location", "\(request.baseURL)/installations/\(id)")])
    }

    func findInstallations(_ request: ParseRequest) async throws -> ParseResponse {
        guard request.auth.isMaster else {
            throw ParseError.operationForbidden("Clients aren't allowed to perform the find operation on the installation collection.")
        }
        return try await find(request, className: ClassName.installation)
    }

    func getInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let shape = try request.fetchShape()
        let relations = try await accounts.schemas.relationFields(className: ClassName.installation, on: request.db)
        let installation = try await accounts.installations.get(objectId: id, auth: request.auth, pointerFields: request.access.pointerFields,
                                                                keys: shape.topLevelKeys, relations: relations, on: request.db)
        return .ok(try await queries.shape(installation, shape: shape, auth: request.auth, on: request.db))
    }

    func updateInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let (installations, auth, pointerFields) = (accounts.installations, request.auth, request.access.pointerFields)
        return .ok(try await accounts.relations.write(systemClass: ClassName.installation, owner: id, body: request.object, on: request.db) { body, db throws(ParseError) in
            try await installations.update(objectId: id, body: body, auth: auth, pointerFields: pointerFields, on: db)
        })
    }

    func deleteInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        let (installations, auth) = (accounts.installations, request.auth)
        try await accounts.relations.delete(systemClass: ClassName.installation, objectId: id, on: request.db) { db throws(ParseError) in
            try await installations.delete(objectId: id, auth: auth, on: db)
        }
        return .empty
    }

    // MARK: Classes

    func createObject(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await signUp(request)
        case ClassName.installation: return try await saveInstallation(request)
        case ClassName.session: throw ParseError.operationForbidden("sessions are created by signing up or logging in")
        case ClassName.role:
            let created = try await accounts.roleWriter.create(body: request.object, auth: request.auth, on: request.db)
            let id = created["objectId"]?.string ?? ""
            return ParseResponse(status: .created, json: .object(created), headers: [("Location", "\(request.baseURL)/classes/_Role/\(id)")])
        default:
            let created = try await accounts.relations.create(className: className, body: request.object, auth: request.auth, access: request.access, on: request.db)
            let id = created["objectId"]?.string ?? ""
            return ParseResponse(status: .created, json: .object(created), headers: [("Location", "\(request.baseURL)/classes/\(className)/\(id)")])
        }
    }

    func findObjects(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        switch className {
        case ClassName.installation: return try await findInstallations(request)
        case ClassName.session: return try await listSessions(request)
        case CloudClassName.jobStatus: return try await findJobStatus(request, id: nil)
        case PushClassName.pushStatus: return try await findPushStatus(request, id: nil)
        default: return try await find(request, className: className)
        }
    }

    func getObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await getUser(request, id: id)
        case ClassName.installation: return try await getInstallation(request, id: id)
        case ClassName.session: return try await getSession(request, id: id)
        case CloudClassName.jobStatus: return try await findJobStatus(request, id: id)
        case PushClassName.pushStatus: return try await findPushStatus(request, id: id)
        default:
            let shape = try request.fetchShape()
            let object = try await accounts.objects.get(className: className, objectId: id, auth: request.auth, access: request.access,
                                                        keys: shape.topLevelKeys, on: request.db)
            return .ok(try await queries.shape(object, shape: shape, auth: request.auth, on: request.db))
        }
    }

    func updateObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await updateUser(request, id: id)
        case ClassName.installation: return try await updateInstallation(request, id: id)
        case ClassName.session: throw ParseError.operationForbidden("sessions cannot be modified")
        case ClassName.role: return .ok(try await accounts.roleWriter.update(objectId: id, body: request.object, auth: request.auth, access: request.access, on: request.db))
        default:
            return .ok(try await accounts.relations.update(className: className, objectId: id, body: request.object, auth: request.auth,
                                                           access: request.access, on: request.db))
        }
    }

    func deleteObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await deleteUser(request, id: id)
        case ClassName.installation: return try await deleteInstallation(request, id: id)
        case ClassName.session: return try await deleteSession(request, id: id)
        case ClassName.role:
            try await accounts.roleWriter.delete(objectId: id, auth: request.auth, access: request.access, on: request.db)
            return .empty
        default:
            try await accounts.relations.delete(className: className, objectId: id, auth: request.auth, access: request.access, on: request.db)
            return .empty
        }
    }

    // MARK: Server

    /// `GET /serverInfo` (master key): the version and the `features` object SDKs and dashboards
    /// read (Parse Server's `FeaturesRouter`). Each flag says whether Parley serves that
    /// feature's endpoints: of them it serves `/config` (read and update), `/hooks` and `/jobs`
    /// (with Cloud Code wired), `/push` (immediate and scheduled) and `/schemas`, not yet `/scriptlog`.
    func serverInfo() -> ParseResponse {
        let no: JSONValue = false
        let hooks: JSONValue = cloud != nil ? true : false
        let features: JSONObject = [
            "globalConfig": ["create": true, "read": true, "update": true, "delete": true],
            "hooks": ["create": hooks, "read": hooks, "update": hooks, "delete": hooks],
            "cloudCode": ["jobs": hooks],
            "logs": ["level": no, "size": no, "order": no, "until": no, "from": no],
            "push": ["immediatePush": .bool(configuration.push != nil), "scheduledPush": .bool(configuration.push != nil), "storedPushData": no,
                     "pushAudiences": no, "localization": no],
            "schemas": ["addField": true, "removeField": true, "addClass": true, "removeClass": true, "clearAllDataFromClass": no,
                        "exportClass": no, "editClassLevelPermissions": true, "editPointerPermissions": true],
        ]
        return .ok(["features": .object(features), "parseServerVersion": .string(Self.parseServerVersion)])
    }
}
