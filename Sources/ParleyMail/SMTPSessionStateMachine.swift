import ParleyNet

/// How an SMTP connection is protected.
public enum SMTPSecurity: String, Sendable, CaseIterable {
    /// Plain TCP (port 25 or a relay on a private network).
    case none
    /// Plain TCP upgraded with STARTTLS before anything else is sent (port 587); a server
    /// that does not offer it is an error, never a silent downgrade.
    case startTLS = "starttls"
    /// TLS from the first byte (port 465).
    case tls
}

/// The client side of one SMTP session that delivers one mail (RFC 5321), sans-I/O: it is fed
/// the server's replies (and the end of a TLS handshake) and returns what to do next. The
/// executor (`SMTPClient`) owns the socket and the timers.
///
/// EHLO (HELO if the server refuses EHLO and nothing needs extensions), STARTTLS when
/// configured, AUTH PLAIN or LOGIN when credentials are configured (never in clear text unless
/// explicitly allowed), MAIL FROM, RCPT TO, DATA with dot-stuffing, QUIT.
struct SMTPSessionStateMachine {
    struct Settings: Sendable {
        var heloName: String
        var security: SMTPSecurity
        var credentials: SMTPCredentials?
        var allowInsecureAuthentication: Bool
    }

    enum Action: Equatable {
        /// Write these bytes.
        case send([UInt8])
        /// Start the TLS handshake on the connection, then call `tlsEstablished`.
        case startTLS
        /// The server accepted the mail (its reply); QUIT was queued before this action.
        case delivered(SMTPReply)
        /// The session failed; close the connection.
        case fail(SMTPError)
        /// Nothing to do until the next reply.
        case wait
    }

    private enum State {
        case greeting
        case ehlo
        case helo
        case startTLS
        case tlsHandshake
        case authenticating
        case authLoginUsername
        case authLoginPassword
        case mailFrom
        case rcptTo
        case data
        case body
        case quit
        case finished
    }

    private let settings: Settings
    private let sender: String
    private let recipient: String
    private let payload: [UInt8]
    private var state = State.greeting
    private(set) var isEncrypted: Bool
    private var extensions = Set<String>()
    private var authMechanisms = Set<String>()

    /// `isEncrypted` is true when the connection is TLS from the start (`SMTPSecurity.tls`).
    init(settings: Settings, sender: String, recipient: String, message: [UInt8], isEncrypted: Bool) {
        self.settings = settings
        self.sender = sender
        self.recipient = recipient
        payload = Self.dataPayload(message)
        self.isEncrypted = isEncrypted
    }

    var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    /// Feeds one reply.
    mutating func receive(_ reply: SMTPReply) -> Action {
        switch state {
        case .greeting:
            guard reply.code == 220 else { return fail(reply) }
            return sendEHLO()
        case .ehlo:
            guard reply.isPositive else {
                guard (500..<600).contains(reply.code), !needsExtensions else { return fail(reply) }
                state = .helo
                return send("HELO \(settings.heloName)")
            }
            readExtensions(reply)
            if settings.security == .startTLS && !isEncrypted {
                guard extensions.contains("STARTTLS") else { return finish(.fail(.startTLSNotOffered)) }
                state = .startTLS
                return send("STARTTLS")
            }
            return authenticateOrSend()
        case .helo:
            guard reply.isPositive else { return fail(reply) }
            return authenticateOrSend()
        case .startTLS:
            guard reply.code == 220 else { return fail(reply) }
            state = .tlsHandshake
            return .startTLS
        case .tlsHandshake:
            return finish(.fail(.protocolViolation("reply during the TLS handshake")))
        case .authenticating:
            guard reply.code == 235 else { return finish(.fail(reply.code == 334 ? .protocolViolation("unexpected AUTH challenge") : .authenticationFailed(reply))) }
            return mailFrom()
        case .authLoginUsername:
            guard reply.code == 334, let credentials = settings.credentials else { return finish(.fail(.authenticationFailed(reply))) }
            state = .authLoginPassword
            return send(Base64.encode(Array(credentials.username.utf8)))
        case .authLoginPassword:
            guard reply.code == 334, let credentials = settings.credentials else { return finish(.fail(.authenticationFailed(reply))) }
            state = .authenticating
            return send(Base64.encode(Array(credentials.password.utf8)))
        case .mailFrom:
            guard reply.isPositive else { return fail(reply) }
            state = .rcptTo
            return send("RCPT TO:<\(recipient)>")
        case .rcptTo:
            guard reply.isPositive else { return fail(reply) }
            state = .data
            return send("DATA")
        case .data:
            guard reply.code == 354 else { return fail(reply) }
            state = .body
            return .send(payload)
        case .body:
            guard reply.isPositive else { return fail(reply) }
            state = .quit
            return .delivered(reply)
        case .quit, .finished:
            return .wait
        }
    }

    /// The TLS handshake that `startTLS` asked for finished: greet again (RFC 3207 4.2).
    mutating func tlsEstablished() -> Action {
        guard case .tlsHandshake = state else { return finish(.fail(.protocolViolation("TLS outside STARTTLS"))) }
        isEncrypted = true
        extensions = []
        authMechanisms = []
        return sendEHLO()
    }

    /// The bytes that end the session politely after `delivered`.
    mutating func quit() -> [UInt8] {
        state = .finished
        return Array("QUIT\r\n".utf8)
    }

    // MARK: Steps

    private var needsExtensions: Bool {
        (settings.security == .startTLS && !isEncrypted) || settings.credentials != nil
    }

    private mutating func sendEHLO() -> Action {
        state = .ehlo
        return send("EHLO \(settings.heloName)")
    }

    private mutating func readExtensions(_ reply: SMTPReply) {
        for line in reply.lines.dropFirst() {
            let words = line.uppercased().split(whereSeparator: { $0 == " " || $0 == "=" })
            guard let keyword = words.first else { continue }
            extensions.insert(String(keyword))
            if keyword == "AUTH" { authMechanisms.formUnion(words.dropFirst().map(String.init)) }
        }
    }

    private mutating func authenticateOrSend() -> Action {
        guard let credentials = settings.credentials else { return mailFrom() }
        guard isEncrypted || settings.allowInsecureAuthentication else { return finish(.fail(.insecureAuthenticationRefused)) }
        if authMechanisms.contains("PLAIN") {
            state = .authenticating
            return send("AUTH PLAIN " + Base64.encode([0] + Array(credentials.username.utf8) + [0] + Array(credentials.password.utf8)))
        }
        if authMechanisms.contains("LOGIN") {
            state = .authLoginUsername
            return send("AUTH LOGIN")
        }
        return finish(.fail(.authenticationNotOffered))
    }

    private mutating func mailFrom() -> Action {
        state = .mailFrom
        return send("MAIL FROM:<\(sender)>")
    }

    private func send(_ command: String) -> Action {
        .send(Array((command + "\r\n").utf8))
    }

    private mutating func fail(_ reply: SMTPReply) -> Action {
        switch reply.code {
        case 400..<500: finish(.fail(.transient(reply)))
        case 500..<600: finish(.fail(.permanent(reply)))
        default: finish(.fail(.protocolViolation("unexpected reply \(reply)")))
        }
    }

    private mutating func finish(_ action: Action) -> Action {
        state = .finished
        return action
    }

    /// The DATA payload: lines in CRLF, a line starting with `.` doubled (RFC 5321 4.5.2),
    /// then the `CRLF . CRLF` terminator.
    static func dataPayload(_ message: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(message.count + message.count / 64 + 8)
        var atLineStart = true
        var index = 0
        while index < message.count {
            let byte = message[index]
            if atLineStart && byte == UInt8(ascii: ".") { out.append(byte) }
            if byte == 13 || byte == 10 {
                out += [13, 10]
                if byte == 13, index + 1 < message.count, message[index + 1] == 10 { index += 1 }
                atLineStart = true
            } else {
                out.append(byte)
                atLineStart = false
            }
            index += 1
        }
        if !atLineStart { out += [13, 10] }
        out += Array(".\r\n".utf8)
        return out
    }
}

/// A user name and password for SMTP AUTH.
public struct SMTPCredentials: Sendable, Equatable {
    public var username: String
    public var password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }
}
