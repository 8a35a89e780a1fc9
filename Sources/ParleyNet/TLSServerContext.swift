import COpenSSL
import Synchronization

/// A listener's TLS settings: one or more certificates chosen by SNI, reloadable at runtime.
///
/// `makeSession` gives each accepted connection a session on the current certificate set;
/// `reload` reads the files again and swaps the set, so new handshakes use the new
/// certificates while open connections keep the ones they started with.
public final class TLSServerContext: Sendable {
    /// One certificate: a PEM chain file (leaf first) and its PEM private key file.
    public struct Certificate: Sendable, Equatable {
        public var chainFile: String
        public var keyFile: String

        public init(chainFile: String, keyFile: String) {
            self.chainFile = chainFile
            self.keyFile = keyFile
        }
    }

    /// The certificates, the first being the one served when SNI names none of them.
    public let certificates: [Certificate]
    /// A connection whose handshake is not done this long after accept is closed.
    public let handshakeTimeout: Duration
    private let current: Mutex<TLSCertificateSet>

    /// Loads every certificate (throws on the first that does not load).
    public init(certificates: [Certificate], handshakeTimeout: Duration = .seconds(10)) throws(TLSError) {
        guard !certificates.isEmpty else { throw .configuration("no certificate given") }
        self.certificates = certificates
        self.handshakeTimeout = handshakeTimeout
        current = Mutex(try TLSCertificateSet(certificates: certificates))
    }

    /// Reads the certificate and key files again; on failure the current set stays in use.
    /// Blocks on file reads: call it off the event loops.
    public func reload() throws(TLSError) {
        let fresh = try TLSCertificateSet(certificates: certificates)
        current.withLock { $0 = fresh }
    }

    /// A server session on the current certificate set.
    public func makeSession() throws(TLSError) -> TLSConnection {
        let set = current.withLock { $0 }
        return try TLSConnection(context: set.contexts[0], serverName: nil, owner: set)
    }

    /// The current set's leaf certificates' SHA-256 fingerprints (hex), for logs and tests.
    public var fingerprints: [String] { current.withLock { $0 }.fingerprints }
}

/// Server contexts loaded from one read of the files; the first is the default, and SNI picks
/// the first whose leaf certificate is valid for the requested name.
final class TLSCertificateSet: @unchecked Sendable {
    let contexts: [TLSContext]
    let fingerprints: [String]

    init(certificates: [TLSServerContext.Certificate]) throws(TLSError) {
        var contexts: [TLSContext] = []
        for certificate in certificates {
            contexts.append(try TLSContext.server(certificateChainFile: certificate.chainFile, privateKeyFile: certificate.keyFile))
        }
        self.contexts = contexts
        fingerprints = contexts.map { $0.leafFingerprint }
        // The callback runs on the default context (where every server session starts); the
        // sessions keep this set alive (`TLSConnection.owner`), so the unretained pointer holds.
        if contexts.count > 1 {
            _ = parley_SSL_CTX_set_tlsext_servername_callback(contexts[0].context, selectCertificate)
            _ = parley_SSL_CTX_set_tlsext_servername_arg(contexts[0].context, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    /// The context for `name`, nil when only the default fits.
    func context(forServerName name: String) -> TLSContext? {
        contexts.dropFirst().first { $0.certificateMatches(serverName: name) }
    }
}

/// SNI: switches the session to the certificate for the name the client asked for; an unknown
/// name gets the default certificate (the client's name check then decides).
private let selectCertificate: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutableRawPointer?) -> Int32 = { ssl, _, arg in
    guard let ssl, let arg, let raw = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return SSL_TLSEXT_ERR_OK }
    let set = Unmanaged<TLSCertificateSet>.fromOpaque(arg).takeUnretainedValue()
    let name = String(cString: raw)
    guard !set.contexts[0].certificateMatches(serverName: name), let chosen = set.context(forServerName: name) else {
        return SSL_TLSEXT_ERR_OK
    }
    _ = SSL_set_SSL_CTX(ssl, chosen.context)
    return SSL_TLSEXT_ERR_OK
}
