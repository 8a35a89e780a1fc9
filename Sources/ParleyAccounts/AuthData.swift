import ParleyJSON

/// Verifies one provider's `authData` for signup, login and linking. The server implements it
/// over ParleyIdentity; the accounts module never asks a provider itself.
public protocol AuthDataVerifier: Sendable {
    /// The provider's user id that `data` proves: 252 for an unknown or disabled provider, 101
    /// when the data proves nothing.
    func verify(provider: String, data: JSONObject) async throws(ParseError) -> String
}

/// No provider enabled: every `authData` is refused with 252.
public struct NoAuthDataVerifier: AuthDataVerifier {
    public init() {}

    public func verify(provider: String, data: JSONObject) async throws(ParseError) -> String {
        throw ParseError.unsupportedAuth
    }
}

/// A write's `authData` member taken apart: the providers to link (each verified before anything
/// is stored) and the providers to unlink (`null`).
struct AuthDataChange: Sendable {
    /// A provider entry that proves `id`.
    struct Link: Sendable {
        let provider: String
        let data: JSONObject
        var id: String
    }

    private(set) var links: [Link] = []
    private(set) var unlinks: [String] = []

    /// Most providers one write may name.
    static let maxProviders = 16
    /// Longest provider name, in bytes.
    static let maxProviderBytes = 64

    /// Parses `value`: an object of provider names to objects or `null`. Anything else (a
    /// `null` authData, a name that cannot be a provider, an entry that is not an object) is
    /// Parse's 252.
    init(_ value: JSONValue) throws(ParseError) {
        guard let object = value.object else { throw ParseError.unsupportedAuth }
        guard object.count <= Self.maxProviders else { throw ParseError.unsupportedAuth }
        for (provider, entry) in object {
            guard Self.isProviderName(provider) else { throw ParseError.unsupportedAuth }
            if entry.isNull {
                unlinks.append(provider)
            } else if let data = entry.object {
                // An empty entry links nothing (Parse skips it).
                if !data.isEmpty { links.append(Link(provider: provider, data: data, id: "")) }
            } else {
                throw ParseError.unsupportedAuth
            }
        }
    }

    /// Whether the change names no provider at all (`{}`).
    var isEmpty: Bool { links.isEmpty && unlinks.isEmpty }

    /// The linked providers' names joined with `,` (`_Session.createdWith.authProvider`).
    var providerNames: String { links.map(\.provider).joined(separator: ",") }

    /// Asks `verifier` about every entry to link, in order; the first refusal wins.
    mutating func verify(with verifier: any AuthDataVerifier) async throws(ParseError) {
        for index in links.indices {
            let id = try await verifier.verify(provider: links[index].provider, data: links[index].data)
            guard id == links[index].data["id"]?.string else { throw ParseError.objectNotFound("\(links[index].provider) authData does not prove its id.") }
            links[index].id = id
        }
    }

    /// The entries to link as one JSON object (`{provider: data}`), merged into `users.auth_data`.
    var linkJSON: String {
        var object = JSONObject()
        for link in links { object[link.provider] = .object(link.data) }
        return JSONValue.object(object).serialized()
    }

    /// Letters, digits, `_` and `-`, at most `maxProviderBytes` bytes.
    static func isProviderName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard !utf8.isEmpty, utf8.count <= maxProviderBytes else { return false }
        return utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95 || $0 == 45 }
    }
}
