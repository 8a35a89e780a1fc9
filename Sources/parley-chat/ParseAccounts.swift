import ParleyJSON
import ParleyKit
import ParleyKitLinux

/// The few Parse REST calls the example needs (accounts stay with the Parse SDKs in real apps).
struct ParseAccounts: Sendable {
    let server: ParleyServerURL
    let http: LinuxHTTPTransport
    let appId: String
    let installationId: String

    struct Session: Sendable {
        var userId: String
        var username: String
        var token: String
    }

    struct User: Sendable {
        var userId: String
        var username: String
    }

    func signUp(_ username: String, password: String) async throws(ParleyError) -> Session {
        let body = try await call("POST", "/parse/users", ["username": .string(username), "password": .string(password)])
        guard let id = body["objectId"]?.string, let token = body["sessionToken"]?.string else { throw .badResponse("signup") }
        return Session(userId: id, username: username, token: token)
    }

    func logIn(_ username: String, password: String) async throws(ParleyError) -> Session {
        let body = try await call("POST", "/parse/login", ["username": .string(username), "password": .string(password)])
        guard let id = body["objectId"]?.string, let token = body["sessionToken"]?.string else { throw .badResponse("login") }
        return Session(userId: id, username: username, token: token)
    }

    func setLocation(_ session: Session, latitude: Double, longitude: Double) async throws(ParleyError) {
        _ = try await call("PUT", "/parse/users/\(session.userId)",
                           ["location": ["__type": "GeoPoint", "latitude": .double(latitude), "longitude": .double(longitude)]],
                           token: session.token)
    }

    /// Users within `kilometers` of the point, nearest first.
    func nearby(_ session: Session, latitude: Double, longitude: Double, kilometers: Double) async throws(ParleyError) -> [User] {
        let whereClause: JSONValue = ["location": ["$nearSphere": ["__type": "GeoPoint", "latitude": .double(latitude),
                                                                   "longitude": .double(longitude)],
                                                   "$maxDistanceInKilometers": .double(kilometers)]]
        return try await users(whereClause, session: session)
    }

    func user(id userId: String, session: Session) async throws(ParleyError) -> User? {
        let body = try await call("GET", "/parse/users/" + ParleyREST.percentEncoded(userId), nil, token: session.token)
        return body["username"]?.string.map { User(userId: userId, username: $0) }
    }

    func user(named username: String, session: Session) async throws(ParleyError) -> User? {
        try await users(["username": .string(username)], session: session).first
    }

    private func users(_ whereClause: JSONValue, session: Session) async throws(ParleyError) -> [User] {
        let target = "/parse/users?limit=20&where=" + ParleyREST.percentEncoded(whereClause.serialized())
        let body = try await call("GET", target, nil, token: session.token)
        return (body["results"]?.array ?? []).compactMap { item in
            guard let id = item["objectId"]?.string, let name = item["username"]?.string else { return nil }
            return User(userId: id, username: name)
        }
    }

    private func call(_ method: String, _ target: String, _ body: JSONValue?, token: String? = nil) async throws(ParleyError) -> JSONObject {
        var headers = [("X-Parse-Application-Id", appId), ("X-Parse-Installation-Id", installationId)]
        if let token { headers.append(("X-Parse-Session-Token", token)) }
        var bytes: [UInt8] = []
        if let body {
            body.serialize(into: &bytes)
            headers.append(("Content-Type", "application/json"))
        }
        let response = try await http.send(ParleyHTTPRequest(method: method, target: target, headers: headers, body: bytes), to: server)
        let parsed = try? JSONParser().parse(response.body)
        guard (200..<300).contains(response.status), let object = parsed?.object else {
            throw .server(code: parsed?["code"].map { $0.serialized() } ?? "\(response.status)", message: parsed?["error"]?.string ?? "")
        }
        return object
    }
}
