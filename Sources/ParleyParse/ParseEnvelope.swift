import ParleyAccounts
import ParleyHTTP
import ParleyJSON

/// The JSON body of a request with the JavaScript SDK's envelope taken out: the credentials it
/// carries (used where the headers lack them, `ParseCredentials`), the effective method of the
/// `_method` form, and the object that remains.
struct ParseEnvelope: Sendable {
    var applicationID: String?
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

    /// Reads `request`'s body (none, or a raw one: no envelope, the request's own method).
    init(_ request: HTTPRequest, rawBody: Bool = false) {
        method = request.method
        guard !rawBody, !request.body.isEmpty else { return }
        let parsed: JSONValue
        do {
            parsed = try JSONParser(maxDepth: Self.maxBodyDepth).parse(request.body)
        } catch {
            let type = request.headers["Content-Type"].map { "Content-Type \($0)" } ?? "no Content-Type"
            bodyError = .invalidJSON("Invalid JSON: this endpoint expects a JSON object (application/json); the body (\(request.body.count) bytes, \(type)) is not JSON (\(error.reason))")
            return
        }
        guard case .object(var object) = parsed else {
            bodyError = .invalidJSON("Invalid JSON: this endpoint expects a JSON object (application/json), not \(Self.kind(of: parsed))")
            return
        }
        func take(_ key: String) -> String? {
            guard let value = object[key] else { return nil }
            object[key] = nil
            return value.string
        }
        let override = take("_method")
        applicationID = take("_ApplicationId")
        masterKey = take("_MasterKey")
        sessionToken = take("_SessionToken")
        installationID = take("_InstallationId")
        Self.removeEnvelope(from: &object)
        if request.method == .post, let override, let effective = HTTPMethod(rawValue: override.uppercased()),
           [.get, .post, .put, .delete].contains(effective) {
            method = effective
            bodyIsQuery = effective == .get
        }
        body = object
    }

    /// Drops the envelope's members (a batch sub-request's body never carries credentials).
    static func removeEnvelope(from object: inout JSONObject) {
        for key in envelopeKeys where object[key] != nil { object[key] = nil }
    }

    private static func kind(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
