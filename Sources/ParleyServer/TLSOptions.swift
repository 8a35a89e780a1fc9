import ParleyNet

/// The listener's TLS (`--tls-cert`, `--tls-key`, `--tls-port`) and the CA file outgoing calls
/// verify against (`--tls-ca-file`). docs/tls.md.
public struct TLSSettings: Sendable {
    /// Certificates in SNI order; the first is served to clients that name none of them.
    public var certificates: [TLSServerContext.Certificate]
    /// A port for TLS beside the plain `--port`; nil = `--port` itself speaks TLS.
    public var port: Int?
    public var handshakeTimeout: Duration
}

extension ServerConfig {
    /// Options of TLS, served and verified.
    static let tlsOptions: [ConfigOption] = [
        ConfigOption("tls-cert", env: "PARLEY_TLS_CERT", default: "",
                     "Comma-separated PEM certificate chain files (leaf first) for HTTPS and WSS; several = SNI picks the one valid for the name the client asks for, the first otherwise. Empty = no TLS. SIGHUP reloads them."),
        ConfigOption("tls-key", env: "PARLEY_TLS_KEY", default: "", "Comma-separated PEM private key files, one per --tls-cert entry, in the same order."),
        ConfigOption("tls-port", env: "PARLEY_TLS_PORT", default: "",
                     "With --tls-cert: serve TLS on this port and keep plain HTTP on --port (health checks behind a load balancer); 0 = a free port (see --port-file); empty = --port itself speaks TLS."),
        ConfigOption("tls-handshake-timeout", env: "PARLEY_TLS_HANDSHAKE_TIMEOUT", default: "10s", "A TLS connection whose handshake is not done this long after accept is closed."),
        ConfigOption("tls-ca-file", env: "PARLEY_TLS_CA_FILE", default: "",
                     "PEM CA bundle that outgoing HTTPS and SMTP TLS peers are verified against (chain and host name); empty = the system store."),
    ]

    static func tlsSettings(_ values: ConfigValues) throws(ConfigError) -> TLSSettings? {
        let chains = values.list("tls-cert")
        let keys = values.list("tls-key")
        let portText = values.optionalString("tls-port")
        guard !chains.isEmpty else {
            if !keys.isEmpty || portText != nil {
                throw .invalidValue(option: values.origin(keys.isEmpty ? "tls-port" : "tls-key"), value: keys.isEmpty ? portText ?? "" : values.string("tls-key"),
                                    expected: "nothing without --tls-cert")
            }
            return nil
        }
        guard chains.count == keys.count else {
            throw .invalidValue(option: values.origin("tls-key"), value: values.string("tls-key"),
                                expected: "one key file per --tls-cert file (\(chains.count))")
        }
        var port: Int?
        if portText != nil { port = try values.int("tls-port", in: 0...65535) }
        let timeout = try values.duration("tls-handshake-timeout")
        guard timeout >= .milliseconds(100) else {
            throw .invalidValue(option: values.origin("tls-handshake-timeout"), value: values.string("tls-handshake-timeout"),
                                expected: "a duration of at least 100ms")
        }
        return TLSSettings(certificates: zip(chains, keys).map { TLSServerContext.Certificate(chainFile: $0, keyFile: $1) },
                           port: port, handshakeTimeout: timeout)
    }
}
