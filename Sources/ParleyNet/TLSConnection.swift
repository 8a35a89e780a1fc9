import COpenSSL

/// A sans-I/O TLS session over memory BIOs: the event loop feeds it socket bytes and writes what
/// it produces, so no OpenSSL call ever touches a socket or blocks a loop.
///
/// `receive` takes ciphertext and returns plaintext; `send` takes plaintext; `takeOutput` hands
/// back the ciphertext (handshake records, application records, alerts) to write to the socket.
public final class TLSConnection {
    /// Where the session is.
    public enum State: Equatable, Sendable {
        case handshaking
        case established
        case closed
        case failed(TLSError)
    }

    /// Bound on plaintext queued before the handshake ends and on ciphertext waiting to be taken.
    public static let maximumBufferedBytes = 256 * 1024

    public private(set) var state: State = .handshaking
    private let ssl: OpaquePointer
    private let input: OpaquePointer
    private let output: OpaquePointer
    private let context: TLSContext
    private var pendingPlaintext: [UInt8] = []
    private let owner: AnyObject?

    /// A server session, or a client one verifying `serverName` (also sent as SNI unless it is
    /// a numeric address, which is checked against the certificate's IP entries) when the
    /// context is a client context.
    public convenience init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        try self.init(context: context, serverName: serverName, owner: nil)
    }

    /// `owner` is kept alive as long as the session (the certificate set its SNI callback reads).
    init(context: TLSContext, serverName: String?, owner: AnyObject?) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else { throw .configuration("SSL_new: \(openSSLErrors())") }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .configuration("BIO_new: \(openSSLErrors())")
        }
        SSL_set_bio(ssl, input, output)
        self.ssl = ssl
        self.input = input
        self.output = output
        self.context = context
        self.owner = owner
        if context.isClient {
            guard let serverName, !serverName.isEmpty else { throw .configuration("a client session needs the server's name") }
            if (try? SocketAddress(host: serverName, port: 0)) != nil && serverName != "localhost" {
                let bare = serverName.hasPrefix("[") ? String(serverName.dropFirst().dropLast()) : serverName
                guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), bare) == 1 else {
                    throw .configuration("cannot set server address \(serverName): \(openSSLErrors())")
                }
            } else {
                guard parley_SSL_set_tlsext_host_name(ssl, serverName) == 1, SSL_set1_host(ssl, serverName) == 1 else {
                    throw .configuration("cannot set server name \(serverName): \(openSSLErrors())")
                }
            }
            let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
            _ = SSL_set_alpn_protos(ssl, alpn, UInt32(alpn.count))
            SSL_set_connect_state(ssl)
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// The protocol ALPN agreed on, if any.
    public var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The negotiated protocol version, e.g. "TLSv1.3".
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// Starts the handshake (a client's ClientHello); a server waits for `receive`.
    public func start() throws(TLSError) {
        try advanceHandshake()
    }

    /// Feeds ciphertext from the socket; returns the plaintext it completes.
    public func receive(_ ciphertext: [UInt8]) throws(TLSError) -> [UInt8] {
        try typed { try ciphertext.withUnsafeBytes { try feed($0) } }
        var plaintext: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = try typed { try chunk.withUnsafeMutableBytes { try readPlaintext(into: $0) } }
            if count == 0 { return plaintext }
            plaintext += chunk[0..<count]
        }
    }

    /// Hands ciphertext from the socket to the session (and advances the handshake); read the
    /// plaintext with `readPlaintext` and write `readOutput`'s ciphertext after it.
    public func feed(_ ciphertext: UnsafeRawBufferPointer) throws(TLSError) {
        try checkOpen()
        if !ciphertext.isEmpty {
            let written = BIO_write(input, ciphertext.baseAddress, Int32(ciphertext.count))
            guard written == Int32(ciphertext.count) else { throw fail(.protocolError("BIO_write")) }
        }
        if state == .handshaking { try advanceHandshake() }
    }

    /// Decrypts into `buffer` until it is full or no whole record is left; 0 when none (or
    /// the peer sent close_notify: `state` is then `.closed`).
    public func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> Int {
        guard state == .established else { return 0 }
        var filled = 0
        while filled < buffer.count {
            let count = SSL_read(ssl, buffer.baseAddress! + filled, Int32(min(buffer.count - filled, Int(Int32.max))))
            if count > 0 {
                filled += Int(count)
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return filled
            case SSL_ERROR_ZERO_RETURN:
                state = .closed
                return filled
            default: throw fail(.protocolError(openSSLErrors()))
            }
        }
        return filled
    }

    /// True when fed ciphertext or decrypted plaintext waits to be read.
    public var hasBufferedInput: Bool { BIO_ctrl_pending(input) > 0 || SSL_pending(ssl) > 0 }

    /// Encrypts plaintext (queued until the handshake ends, within `maximumBufferedBytes`).
    public func send(_ plaintext: [UInt8]) throws(TLSError) {
        try typed { try plaintext.withUnsafeBytes { try send($0) } }
    }

    /// Encrypts plaintext (queued until the handshake ends, within `maximumBufferedBytes`);
    /// `plaintext` need only stay valid during the call.
    public func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) {
        try checkOpen()
        guard !plaintext.isEmpty else { return }
        if state == .established && pendingPlaintext.isEmpty {
            guard plaintext.count + Int(BIO_ctrl_pending(output)) <= Self.maximumBufferedBytes else { throw fail(.bufferFull) }
            let count = SSL_write(ssl, plaintext.baseAddress, Int32(plaintext.count))
            guard count == Int32(plaintext.count) else { throw fail(.protocolError(openSSLErrors())) }
            return
        }
        guard pendingPlaintext.count + plaintext.count + Int(BIO_ctrl_pending(output)) <= Self.maximumBufferedBytes else {
            throw fail(.bufferFull)
        }
        pendingPlaintext.append(contentsOf: plaintext)
        if state == .established { try flushPlaintext() }
    }

    /// Ciphertext waiting to be written to the socket, in bytes.
    public var pendingOutputBytes: Int { Int(BIO_ctrl_pending(output)) }

    /// The ciphertext to write to the socket now (may be empty).
    public func takeOutput() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(output))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { readOutput(into: $0) }
        return Array(bytes[0..<read])
    }

    /// Moves up to `buffer.count` bytes of ciphertext to write to the socket into `buffer`.
    public func readOutput(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard BIO_ctrl_pending(output) > 0 else { return 0 }
        let read = BIO_read(output, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        return read > 0 ? Int(read) : 0
    }

    /// Sends close_notify (take the output, then close the socket).
    public func shutdown() {
        if state == .established { _ = SSL_shutdown(ssl) }
        if case .failed = state { return }
        state = .closed
    }

    private func checkOpen() throws(TLSError) {
        switch state {
        case .handshaking, .established: return
        case .closed: throw .closed
        case .failed(let error): throw error
        }
    }

    private func advanceHandshake() throws(TLSError) {
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            state = .established
            try flushPlaintext()
            return
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return
        default:
            let verify = SSL_get_verify_result(ssl)
            if context.isClient, verify != Int(X509_V_OK) {
                _ = openSSLErrors()
                throw fail(.verificationFailed(String(cString: X509_verify_cert_error_string(verify))))
            }
            throw fail(.handshakeFailed(openSSLErrors()))
        }
    }

    private func flushPlaintext() throws(TLSError) {
        guard !pendingPlaintext.isEmpty else { return }
        let count = pendingPlaintext.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard count == Int32(pendingPlaintext.count) else { throw fail(.protocolError(openSSLErrors())) }
        pendingPlaintext.removeAll(keepingCapacity: false)
    }

    /// Runs `body` (a `rethrows` buffer accessor around typed-throwing calls) keeping the type.
    private func typed<T>(_ body: () throws -> T) throws(TLSError) -> T {
        do { return try body() } catch let error as TLSError { throw error } catch { throw .protocolError("\(error)") }
    }

    private func fail(_ error: TLSError) -> TLSError {
        state = .failed(error)
        return error
    }
}
