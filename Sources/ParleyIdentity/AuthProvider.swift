import ParleyJSON

/// A way to log in with `authData.<name>`: checks that the data proves the id it carries.
/// The accounts module calls it for signup, login and linking; it touches no tables.
public protocol AuthProvider: Sendable {
    /// The `authData` key (`apple`, `google`, `facebook`, `anonymous`, a configured OIDC name).
    var name: String { get }

    /// Verifies `authData` and returns the provider's user id it proves.
    func validate(authData: JSONObject) async throws(IdentityError) -> String
}

extension AuthProvider {
    /// `authData.id`: a non-empty string of at most `AuthProviders.maxIDBytes` bytes.
    func requireID(_ authData: JSONObject) throws(IdentityError) -> String {
        guard let id = authData["id"]?.string, !id.isEmpty, id.utf8.count <= AuthProviders.maxIDBytes, !id.utf8.contains(0) else {
            throw .malformedAuthData("\(name) authData needs an id.")
        }
        return id
    }

    /// The first of `fields` that holds a string of at most `maxBytes` bytes.
    func requireToken(_ authData: JSONObject, fields: [String], maxBytes: Int) throws(IdentityError) -> String {
        for field in fields {
            if let token = authData[field]?.string, !token.isEmpty {
                guard token.utf8.count <= maxBytes else { throw .invalidToken("\(field) too long") }
                return token
            }
        }
        throw .malformedAuthData("\(name) authData needs \(fields.joined(separator: " or ")).")
    }
}

/// `authData.anonymous`: an id the client made up (a UUID), nothing to verify.
public struct AnonymousProvider: AuthProvider {
    public let name = "anonymous"

    public init() {}

    public func validate(authData: JSONObject) async throws(IdentityError) -> String {
        try requireID(authData)
    }
}

/// Sign in with Apple, Google or any OpenID Connect provider: `authData` carries the user's id
/// (`sub`) and an ID token the provider signed.
public struct OpenIDConnectProvider: AuthProvider {
    public let name: String
    public let verifier: IDTokenVerifier
    /// The authData members that may hold the ID token, in order.
    public let tokenFields: [String]

    public init(name: String, verifier: IDTokenVerifier, tokenFields: [String]) {
        self.name = name
        self.verifier = verifier
        self.tokenFields = tokenFields
    }

    public func validate(authData: JSONObject) async throws(IdentityError) -> String {
        let id = try requireID(authData)
        let token = try requireToken(authData, fields: tokenFields, maxBytes: JSONWebToken.maxBytes)
        _ = try await verifier.verify(token, subject: id)
        return id
    }
}
