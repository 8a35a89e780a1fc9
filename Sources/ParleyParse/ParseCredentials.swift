import ParleyAccounts
import ParleyHTTP

/// One credential a Parse request may carry, and where it is read: a header first (in place,
/// without making a string), the JavaScript SDK envelope's member where the header is absent.
/// The REST key is a header only, as in Parse Server. The request's headers and envelope are
/// passed in (borrowed) rather than kept, so reading credentials copies nothing.
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

    private func member(of envelope: ParseEnvelope?) -> String? {
        guard let envelope else { return nil }
        switch self {
        case .applicationID: return envelope.applicationID
        case .restAPIKey: return nil
        case .masterKey: return envelope.masterKey
        case .sessionToken: return envelope.sessionToken
        case .installationID: return envelope.installationID
        }
    }

    /// Calls `body` with the credential's UTF-8 bytes; nil when the request has none.
    @inline(__always)
    func withValue<R>(in headers: HTTPHeaders, _ envelope: ParseEnvelope?, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        if let answer = headers.withFirstValue(header, body) { return answer }
        guard var value = member(of: envelope) else { return nil }
        return value.withUTF8(body)
    }

    /// Whether the credential is present and equal to `expected` (compared in constant time).
    @inline(__always)
    func matches(_ expected: String, in headers: HTTPHeaders, _ envelope: ParseEnvelope?) -> Bool {
        withValue(in: headers, envelope) { constantTimeEquals($0, expected) } == true
    }

    /// The credential as a string; nil when absent or empty.
    func string(in headers: HTTPHeaders, _ envelope: ParseEnvelope?) -> String? {
        let value = headers[header] ?? member(of: envelope)
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }
}
