import ParleyAccounts
import ParleyHTTP

/// One credential a Parse request may carry.
enum ParseCredential {
    case applicationID, restAPIKey, masterKey, sessionToken, installationID

    var header: String {
        switch self {
        case .applicationID: "X-Parse-Application-Id"
        case .restAPIKey: "X-Parse-REST-API-Key"
        case .masterKey: "X-Parse-Master-Key"
        case .sessionToken: "X-Parse-Session-Token"
        case .installationID: "X-Parse-Installation-Id"
        }
    }
}

/// The credentials of one request, read where they lie: a header first (in place, without
/// making a string), the JavaScript SDK envelope's member where the header is absent. The REST
/// key is a header only, as in Parse Server.
struct ParseCredentials {
    let headers: HTTPHeaders
    private let applicationID, masterKey, sessionToken, installationID: String?

    /// The credentials of a request and its envelope (nil for a bodiless request).
    init(headers: HTTPHeaders, envelope: ParseEnvelope?) {
        self.headers = headers
        applicationID = envelope?.applicationID
        masterKey = envelope?.masterKey
        sessionToken = envelope?.sessionToken
        installationID = envelope?.installationID
    }

    private func envelopeValue(_ credential: ParseCredential) -> String? {
        switch credential {
        case .applicationID: applicationID
        case .restAPIKey: nil
        case .masterKey: masterKey
        case .sessionToken: sessionToken
        case .installationID: installationID
        }
    }

    /// Calls `body` with the credential's UTF-8 bytes; nil when the request has none.
    @inline(__always)
    func withValue<R>(_ credential: ParseCredential, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        if let answer = headers.withFirstValue(credential.header, body) { return answer }
        guard var value = envelopeValue(credential) else { return nil }
        return value.withUTF8(body)
    }

    /// Whether the credential is present and equal to `expected` (compared in constant time).
    @inline(__always)
    func matches(_ credential: ParseCredential, _ expected: String) -> Bool {
        withValue(credential) { constantTimeEquals($0, expected) } == true
    }

    /// The credential as a string; nil when absent or empty.
    func string(_ credential: ParseCredential) -> String? {
        let value = headers[credential.header] ?? envelopeValue(credential)
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }
}
