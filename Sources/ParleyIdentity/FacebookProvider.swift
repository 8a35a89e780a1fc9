import ParleyHTTP
import ParleyJSON

/// `authData.facebook` = `{id, access_token}`, checked with the Graph API: `/me?fields=id` must
/// answer the same id; then the token must belong to one of the configured apps, through
/// `/debug_token` with the app access token when an app secret is configured (also checks the
/// token is valid and for that user), else through `/app` (Parse Server's check).
public struct FacebookProvider: AuthProvider {
    public let name = "facebook"
    public let configuration: FacebookConfiguration
    private let client: HTTPClient

    /// Longest access token accepted, in bytes.
    public static let maxTokenBytes = 4096

    public init(configuration: FacebookConfiguration, client: HTTPClient) {
        self.configuration = configuration
        self.client = client
    }

    public func validate(authData: JSONObject) async throws(IdentityError) -> String {
        let id = try requireID(authData)
        let token = try requireToken(authData, fields: ["access_token"], maxBytes: Self.maxTokenBytes)
        let me = try await graph("me?fields=id&access_token=" + PercentEncoding.queryValue(token))
        guard me["id"]?.string == id else { throw Self.invalid }
        if let secret = configuration.appSecret, let appID = configuration.appIDs.first {
            let query = "debug_token?input_token=\(PercentEncoding.queryValue(token))&access_token=\(PercentEncoding.queryValue(appID + "|" + secret))"
            let data = try await graph(query)["data"]?.object ?? [:]
            guard data["is_valid"]?.bool == true, let app = Self.idString(data["app_id"]), configuration.appIDs.contains(app),
                  Self.idString(data["user_id"]) == id
            else { throw Self.invalid }
        } else {
            let app = try await graph("app?access_token=" + PercentEncoding.queryValue(token))
            guard let appID = Self.idString(app["id"]), configuration.appIDs.contains(appID) else { throw Self.invalid }
        }
        return id
    }

    static let invalid = IdentityError.invalidToken("Facebook auth is invalid for this user.")

    /// Graph ids are strings, but accept a number too.
    static func idString(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: text
        case .int(let number)?: String(number)
        default: nil
        }
    }

    /// GET `<graph URL>/<pathAndQuery>` as a JSON object. A 4xx answer (Graph's error for a bad
    /// token) is an invalid token; anything else that is not 200 with an object, unavailable.
    private func graph(_ pathAndQuery: String) async throws(IdentityError) -> JSONObject {
        guard let url = HTTPClientURL(configuration.graphURL + "/" + pathAndQuery) else {
            throw .providerUnavailable(provider: name, detail: "cannot request \(configuration.graphURL)")
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(HTTPClientRequest(method: .get, url: url, headers: ["Accept": "application/json"]),
                                                timeout: configuration.timeout)
        } catch {
            throw .providerUnavailable(provider: name, detail: error.description)
        }
        if (400..<500).contains(response.status.code) { throw Self.invalid }
        guard response.status.code == 200, case .object(let object)? = try? JSONParser(maxDepth: 16, maxBytes: 64 * 1024).parse(response.body) else {
            throw .providerUnavailable(provider: name, detail: "Graph API answered \(response.status.code)")
        }
        return object
    }
}

/// How Facebook logins are checked.
public struct FacebookConfiguration: Sendable {
    /// The app ids a token must belong to (at least one).
    public var appIDs: [String]
    /// The app secret: with it, tokens are checked with `/debug_token`.
    public var appSecret: String?
    /// The Graph API base, without a trailing slash (`https://graph.facebook.com`, or a version
    /// path such as `https://graph.facebook.com/v19.0`).
    public var graphURL: String
    /// Deadline of one Graph request.
    public var timeout: Duration

    public init(appIDs: [String], appSecret: String? = nil, graphURL: String = "https://graph.facebook.com", timeout: Duration = .seconds(10)) {
        self.appIDs = appIDs
        self.appSecret = appSecret
        var base = graphURL
        while base.hasSuffix("/") { base.removeLast() }
        self.graphURL = base
        self.timeout = timeout
    }
}
