import ParleyAccounts
import ParleyHTTP
import ParleyJSON

extension ParseAPI {
    /// Every endpoint, in Parse Server's paths.
    static func makeRoutes() -> ParseRoutes {
        var r = ParseRoutes()
        // Users.
        r.add(.post, "/users") { api, q in try await api.signUp(q) }
        r.add(.get, "/users") { api, q in try await api.find(q, className: ClassName.user) }
        r.add(.get, "/users/me") { api, q in try await api.me(q) }
        r.add(.get, "/users/:id") { api, q in try await api.getUser(q, id: q.parameter("id")) }
        r.add(.put, "/users/:id") { api, q in try await api.updateUser(q, id: q.parameter("id")) }
        r.add(.delete, "/users/:id") { api, q in try await api.deleteUser(q, id: q.parameter("id")) }
        r.add(.get, "/login") { api, q in try await api.logIn(q) }
        r.add(.post, "/login") { api, q in try await api.logIn(q) }
        r.add(.post, "/logout") { api, q in try await api.logOut(q) }
        // Sessions.
        r.add(.get, "/sessions/me") { api, q in try await api.sessionMe(q) }
        r.add(.get, "/sessions") { api, q in try await api.listSessions(q) }
        r.add(.get, "/sessions/:id") { api, q in try await api.getSession(q, id: q.parameter("id")) }
        r.add(.delete, "/sessions/:id") { api, q in try await api.deleteSession(q, id: q.parameter("id")) }
        // Installations.
        r.add(.post, "/installations") { api, q in try await api.saveInstallation(q) }
        r.add(.get, "/installations") { api, q in try await api.findInstallations(q) }
        r.add(.get, "/installations/:id") { api, q in try await api.getInstallation(q, id: q.parameter("id")) }
        r.add(.put, "/installations/:id") { api, q in try await api.updateInstallation(q, id: q.parameter("id")) }
        r.add(.delete, "/installations/:id") { api, q in try await api.deleteInstallation(q, id: q.parameter("id")) }
        // Classes (system classes go to their own endpoints).
        r.add(.post, "/classes/:className") { api, q in try await api.createObject(q, className: q.parameter("className")) }
        r.add(.get, "/classes/:className") { api, q in try await api.findObjects(q, className: q.parameter("className")) }
        r.add(.get, "/classes/:className/:id") { api, q in try await api.getObject(q, className: q.parameter("className"), id: q.parameter("id")) }
        r.add(.put, "/classes/:className/:id") { api, q in try await api.updateObject(q, className: q.parameter("className"), id: q.parameter("id")) }
        r.add(.delete, "/classes/:className/:id") { api, q in try await api.deleteObject(q, className: q.parameter("className"), id: q.parameter("id")) }
        // Batch.
        r.add(.post, "/batch") { api, q in try await api.batch(q) }
        return r
    }

    // MARK: Users

    func signUp(_ request: ParseRequest) async throws -> ParseResponse {
        let result = try await accounts.users.signUp(body: request.object, auth: request.auth, on: request.db)
        return ParseResponse(status: .created, body: .object(result.json), headers: [("Location", "\(request.baseURL)/users/\(result.objectId)")])
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
        let user = try await accounts.users.logIn(username: username, email: email, password: password,
                                                  installationId: request.auth.installationId, on: request.db)
        return .ok(user)
    }

    func logOut(_ request: ParseRequest) async throws -> ParseResponse {
        if let token = request.sessionToken {
            try await accounts.sessions.revoke(token: token, on: request.db)
        }
        return .empty
    }

    func me(_ request: ParseRequest) async throws -> ParseResponse {
        guard let session = request.auth.user else { throw ParseError.invalidSession }
        if request.isBatched { return .ok(try await accounts.users.me(session: session, on: request.db)) }
        return .serialized(try await accounts.users.meJSON(session: session, on: request.db))
    }

    func getUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        .ok(try await accounts.users.get(objectId: id, auth: request.auth, keys: request.keys, on: request.db))
    }

    func updateUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        .ok(try await accounts.users.update(objectId: id, body: request.object, auth: request.auth, on: request.db))
    }

    func deleteUser(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        try await accounts.users.delete(objectId: id, auth: request.auth, on: request.db)
        return .empty
    }

    func find(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        let query = try request.parseQuery(className: className)
        // A batch embeds the body in its own response, so it needs the value, not the bytes.
        if !request.isBatched {
            return .serialized(try await queries.findJSON(query, auth: request.auth, on: request.db))
        }
        let (results, count) = try await queries.find(query, auth: request.auth, on: request.db)
        var body: JSONObject = ["results": .array(results.map(JSONValue.object))]
        if let count { body["count"] = .int(Int64(count)) }
        return .ok(body)
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
        let sessions = try await accounts.sessions.list(userId: nil, limit: query.limit, skip: query.skip, on: request.db)
        return .ok(["results": .array(sessions.map(JSONValue.object))])
    }

    func getSession(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        .ok(try await accounts.sessions.get(sessionId: id, auth: request.auth, on: request.db))
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
        return ParseResponse(status: .created, body: .object(result.json), headers: [("Location", "\(request.baseURL)/installations/\(id)")])
    }

    func findInstallations(_ request: ParseRequest) async throws -> ParseResponse {
        guard request.auth.isMaster else {
            throw ParseError.operationForbidden("Clients aren't allowed to perform the find operation on the installation collection.")
        }
        return try await find(request, className: ClassName.installation)
    }

    func getInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        .ok(try await accounts.installations.get(objectId: id, auth: request.auth, keys: request.keys, on: request.db))
    }

    func updateInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        .ok(try await accounts.installations.update(objectId: id, body: request.object, auth: request.auth, on: request.db))
    }

    func deleteInstallation(_ request: ParseRequest, id: String) async throws -> ParseResponse {
        try await accounts.installations.delete(objectId: id, auth: request.auth, on: request.db)
        return .empty
    }

    // MARK: Classes

    func createObject(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await signUp(request)
        case ClassName.installation: return try await saveInstallation(request)
        case ClassName.session: throw ParseError.operationForbidden("sessions are created by signing up or logging in")
        default:
            let created = try await accounts.objects.create(className: className, body: request.object, auth: request.auth, on: request.db)
            let id = created["objectId"]?.string ?? ""
            return ParseResponse(status: .created, body: .object(created), headers: [("Location", "\(request.baseURL)/classes/\(className)/\(id)")])
        }
    }

    func findObjects(_ request: ParseRequest, className: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await find(request, className: className)
        case ClassName.installation: return try await findInstallations(request)
        case ClassName.session: return try await listSessions(request)
        default: return try await find(request, className: className)
        }
    }

    func getObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await getUser(request, id: id)
        case ClassName.installation: return try await getInstallation(request, id: id)
        case ClassName.session: return try await getSession(request, id: id)
        default: return .ok(try await accounts.objects.get(className: className, objectId: id, auth: request.auth, keys: request.keys, on: request.db))
        }
    }

    func updateObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await updateUser(request, id: id)
        case ClassName.installation: return try await updateInstallation(request, id: id)
        case ClassName.session: throw ParseError.operationForbidden("sessions cannot be modified")
        default: return .ok(try await accounts.objects.update(className: className, objectId: id, body: request.object, auth: request.auth, on: request.db))
        }
    }

    func deleteObject(_ request: ParseRequest, className: String, id: String) async throws -> ParseResponse {
        switch className {
        case ClassName.user: return try await deleteUser(request, id: id)
        case ClassName.installation: return try await deleteInstallation(request, id: id)
        case ClassName.session: return try await deleteSession(request, id: id)
        default:
            try await accounts.objects.delete(className: className, objectId: id, auth: request.auth, on: request.db)
            return .empty
        }
    }
}
