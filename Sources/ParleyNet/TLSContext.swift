import COpenSSL

/// One OpenSSL context (certificate, key, verification policy) shared by many `TLSConnection`s.
///
/// TLS 1.2 and 1.3 only; the server offers ALPN `http/1.1`; the client verifies the peer's chain
/// against the system store (or a CA file) and its host name.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    /// True for a client context (connections verify the server's name).
    public let isClient: Bool

    private init(context: OpaquePointer, isClient: Bool) {
        self.context = context
        self.isClient = isClient
    }

    deinit { SSL_CTX_free(context) }

    /// A server context from a PEM certificate chain file and a PEM private key file.
    public static func server(certificateChainFile: String, privateKeyFile: String) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_server_method())
        guard SSL_CTX_use_certificate_chain_file(context, certificateChainFile) == 1 else {
            SSL_CTX_free(context)
            throw .configuration("cannot load certificate chain \(certificateChainFile): \(openSSLErrors())")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1,
              SSL_CTX_check_private_key(context) == 1 else {
            SSL_CTX_free(context)
            throw .configuration("cannot load private key \(privateKeyFile): \(openSSLErrors())")
        }
        SSL_CTX_set_alpn_select_cb(context, selectHTTP11, nil)
        guard SSL_CTX_set_cipher_list(context, serverCipherList) == 1 else {
            SSL_CTX_free(context)
            throw .configuration("cannot set the cipher list: \(openSSLErrors())")
        }
        _ = SSL_CTX_set_options(context, parley_server_options())
        // Resumption by tickets only (keys from `TLSTicketKeys`, rotated); no server-side cache.
        _ = parley_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        _ = SSL_CTX_set_tlsext_ticket_key_evp_cb(context, TLSTicketKeys.callback)
        return TLSContext(context: context, isClient: false)
    }

    /// A client context verifying peers against `caFile`, or the system store when nil.
    public static func client(caFile: String? = nil) throws(TLSError) -> TLSContext {
        let context = try makeContext(method: TLS_client_method())
        let loaded = if let caFile { SSL_CTX_load_verify_locations(context, caFile, nil) } else { SSL_CTX_set_default_verify_paths(context) }
        guard loaded == 1 else {
            SSL_CTX_free(context)
            throw .configuration("cannot load CA certificates \(caFile ?? "(system store)"): \(openSSLErrors())")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        return TLSContext(context: context, isClient: true)
    }

    /// TLS 1.2 suites offered by a server: ECDHE with AES-GCM or ChaCha20-Poly1305 (forward
    /// secret, AEAD only). TLS 1.3 uses OpenSSL's default suites, all of that kind.
    static let serverCipherList = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    /// True when the leaf certificate of this server context is valid for `name` (wildcards
    /// included).
    func certificateMatches(serverName name: String) -> Bool {
        guard let certificate = SSL_CTX_get0_certificate(context) else { return false }
        return X509_check_host(certificate, name, name.utf8.count, 0, nil) == 1
    }

    /// The SHA-256 fingerprint (hex) of this context's leaf certificate; empty for a client.
    var leafFingerprint: String {
        guard let certificate = SSL_CTX_get0_certificate(context) else { return "" }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else { return "" }
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: digest.prefix(Int(length)).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
    }

    private static func makeContext(method: OpaquePointer?) throws(TLSError) -> OpaquePointer {
        guard let context = SSL_CTX_new(method) else { throw .configuration("SSL_CTX_new: \(openSSLErrors())") }
        _ = parley_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        _ = parley_SSL_CTX_set_mode(context, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        return context
    }
}

/// The ALPN choice: `http/1.1` when the client offers it; no ALPN answer otherwise.
private let selectHTTP11: @convention(c) (
    OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
    UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
    guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
    let wanted: [UInt8] = Array("http/1.1".utf8)
    var index = 0
    while index < Int(offeredLength) {
        let length = Int(offered[index])
        let start = index + 1
        guard start + length <= Int(offeredLength) else { break }
        if length == wanted.count, (0..<length).allSatisfy({ offered[start + $0] == wanted[$0] }) {
            out.pointee = offered + start
            outLength.pointee = UInt8(length)
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_NOACK
}

/// OpenSSL's queued error strings, joined (and the queue cleared).
func openSSLErrors() -> String {
    var parts: [String] = []
    var buffer = [CChar](repeating: 0, count: 256)
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        parts.append(String(decoding: text, as: UTF8.self))
    }
    return parts.isEmpty ? "unknown error" : parts.joined(separator: "; ")
}
