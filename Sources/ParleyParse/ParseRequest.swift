import ParleyAccounts
import ParleyHTTP
import ParleyJSON

/// One Parse request after the envelope is unpacked: effective method, path under the mount,
/// parameters, JSON body and the caller's `Auth`. Batch sub-requests are built the same way.
struct ParseRequest: Sendable {
    var method: HTTPMethod
    /// The path below the mount path, starting with `/` (`/users/me`).
    var path: String
    /// Values of the route's `:name` segments.
    var parameters: [String: String] = [:]
    /// URL query parameters (percent-decoded).
    var query: [(name: String, value: String)]
    /// The JSON body with the JavaScript SDK's envelope members removed.
    var body: JSONObject?
    /// True for the JavaScript SDK's `_method: "GET"` form: query parameters are in `body`.
    var bodyIsQuery: Bool
    var auth: Auth
    /// The session token the request sent (even when it is only master-authenticated).
    var sessionToken: String?
    /// `Host` and scheme of the request, for `Location` headers.
    var host: String
    var scheme: String
    var mountPath: String
    /// `http://host/parse`, for `Location` headers.
    var baseURL: String { "\(scheme)://\(host)\(mountPath == "/" ? "" : mountPath)" }
    /// The client or, inside a transactional batch, the transaction.
    var db: any SQLExecutor
    var isBatched: Bool = false

    /// `:name` parameter (present by construction of the route).
    func parameter(_ name: String) -> String { parameters[name] ?? "" }

    /// The body as an object (an absent body is empty).
    var object: JSONObject { body ?? JSONObject() }

    /// A request parameter from the query string, or from the body in the `_method: GET` form.
    func value(_ name: String) -> String? {
        if bodyIsQuery || (method != .get && method != .delete) {
            if let value = body?[name] {
                switch value {
                case .string(let text): return text
                case .int(let number): return String(number)
                default: return nil
                }
            }
        }
        return query.first { $0.name == name }?.value
    }

    /// The Parse query this request describes, for class `className`.
    func parseQuery(className: String) throws(ParseError) -> ParseQuery {
        do {
            if bodyIsQuery { return try ParseQuery.fromJSON(className: className, body: object) }
            return try ParseQuery.fromRequest(className: className, parameters: query)
        } catch {
            throw ParseError(error)
        }
    }

    /// `keys` of a single-object GET, if given.
    var keys: [String]? {
        guard let text = value("keys"), !text.isEmpty else { return nil }
        return text.split(separator: ",").map { String($0) }
    }
}

/// The JavaScript SDK's request envelope and Parse's headers, read from one HTTP request.
struct ParseEnvelope: Sendable {
    var applicationID: String?
    var restAPIKey: String?
    var masterKey: String?
    var sessionToken: String?
    var installationID: String?
    var method: HTTPMethod
    var body: JSONObject?
    var bodyIsQuery = false
    /// Set when the body is not a JSON object although one was required.
    var bodyError: ParseError?

    /// Members of a body that belong to the envelope, never to the object.
    static let envelopeKeys: Set<String> = [
        "_method", "_ApplicationId", "_JavaScriptKey", "_ClientVersion", "_InstallationId", "_SessionToken",
        "_MasterKey", "_RevocableSession", "_ContentType", "_context", "_noBody", "_ClientKey",
    ]
    static let maxBodyDepth = 64

    init(_ request: HTTPRequest) {
        let headers = request.headers
        applicationID = headers["X-Parse-Application-Id"]
        restAPIKey = headers["X-Parse-REST-API-Key"]
        masterKey = headers["X-Parse-Master-Key"]
        sessionToken = headers["X-Parse-Session-Token"]
        installationID = headers["X-Parse-Installation-Id"]
        method = request.method
        guard !request.body.isEmpty else { return }
        let parsed: JSONValue
        do {
            parsed = try JSONParser(maxDepth: Self.maxBodyDepth).parse(request.body)
        } catch {
            bodyError = .invalidJSON("invalid JSON body: \(error.reason)")
            return
        }
        guard case .object(var object) = parsed else {
            bodyError = .invalidJSON("the request body must be a JSON object")
            return
        }
        func take(_ key: String) -> String? {
            guard let value = object[key] else { return nil }
            object[key] = nil
            return value.string
        }
        let override = take("_method")
        let appID = take("_ApplicationId")
        let bodyMaster = take("_MasterKey")
        let bodyToken = take("_SessionToken")
        let bodyInstallation = take("_InstallationId")
        for key in Self.envelopeKeys { object[key] = nil }
        if applicationID == nil { applicationID = appID }
        if masterKey == nil { masterKey = bodyMaster }
        if sessionToken == nil { sessionToken = bodyToken }
        if installationID == nil { installationID = bodyInstallation }
        if request.method == .post, let override, let effective = HTTPMethod(rawValue: override.uppercased()),
           [.get, .post, .put, .delete].contains(effective) {
            method = effective
            bodyIsQuery = effective == .get
        }
        body = object
    }
}
