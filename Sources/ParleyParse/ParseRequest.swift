import ParleyAccounts
import ParleyHTTP
import ParleyJSON

/// One Parse request as an endpoint sees it, after the envelope is unpacked and the request
/// authorized: effective method, route parameters, query, JSON body and the viewer. Batch
/// sub-requests are built the same way, with their batch's viewer.
struct ParseRequest: Sendable {
    var method: HTTPMethod
    /// Values of the route's `:name` segments.
    var parameters: PathParameters
    /// URL query parameters (percent-decoded).
    var query: [(name: String, value: String)]
    /// The JSON body with the JavaScript SDK's envelope members removed.
    var body: JSONObject?
    /// True for the JavaScript SDK's `_method: "GET"` form: query parameters are in `body`.
    var bodyIsQuery: Bool
    /// Who the request acts as (`ParseAuthorizer`).
    var auth: Auth
    /// The session token the request sent (even when it is only master-authenticated).
    var sessionToken: String?
    /// `https://example.com/parse`: the public URL of the mount path, for `Location` headers.
    var baseURL: String
    /// The client or, inside a transactional batch, the transaction.
    var db: any SQLExecutor
    /// The client's address (`ParseServerURL.clientAddress`), for the login throttle.
    var clientAddress: String
    /// The HTTP request's header fields (a batch's sub-requests carry the batch's), for webhooks.
    var headers: HTTPHeaders = HTTPHeaders()
    var isBatched: Bool = false
    /// What class-level permissions leave the viewer (`ParseAPI.run` sets it): the stores apply
    /// its pointer constraints and protected fields.
    var access: ClassAccess = .unrestricted
    /// Bytes of the HTTP body the JSON body came from; nil in batch sub-requests.
    var bodyBytes: Int?
    /// The body of a raw-body endpoint (file uploads); nil elsewhere and in batch sub-requests.
    var rawBody: RawRequestBody?

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

    /// Whether a find asks for `count` (`1` or `true`, in the query string or the body form).
    var counts: Bool {
        if bodyIsQuery, let flag = body?["count"]?.bool { return flag }
        guard let value = value("count") else { return false }
        return value == "1" || value == "true"
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

    /// The shape of a single-object GET (`keys`, `include`, `excludeKeys`), under the same rules
    /// as a query's (`ParseQuery.fetchShape`). `onlyShape` ignores every other parameter (as
    /// `/users/me` always has) rather than refusing it.
    func fetchShape(onlyShape: Bool = false) throws(ParseError) -> ReadShape {
        var parameters: [(name: String, value: JSONValue)] = bodyIsQuery
            ? object.map { ($0.key, $0.value) }
            : query.map { ($0.name, .string($0.value)) }
        if onlyShape { parameters = parameters.filter { ["keys", "include", "excludeKeys"].contains($0.name) } }
        do {
            return try ParseQuery.fetchShape(parameters: parameters)
        } catch {
            throw ParseError(error)
        }
    }
}
