import ParleyJSON
import ParleyKit
import ParleyKitLinux
import ParleyNet

/// The terminal chat: one command or message per line in, one event per line out.
actor ChatApp: ParleyClientDelegate {
    let server: ParleyServerURL
    let dataDirectory: String
    let group: EventLoopGroup
    let pool: BlockingPool
    let http: LinuxHTTPTransport
    let tlsCAFile: String?
    let deviceId: String
    let accounts: ParseAccounts

    private var session: ParseAccounts.Session?
    private var client: ParleyClient?
    private var partner: ParseAccounts.User?
    /// The partner's presence was refused (they have not written to us yet): asked again when they do.
    private var partnerPresencePending = false
    private var location: (latitude: Double, longitude: Double)?
    private var names: [String: String] = [:]
    /// Message ids and texts we sent, for receipts.
    private var sentTexts: [String: String] = [:]
    private var unread: [String] = []
    private var call: Call?

    init(server: ParleyServerURL, dataDirectory: String, appId: String, group: EventLoopGroup, pool: BlockingPool, deviceId: String,
         tlsCAFile: String? = nil) {
        self.server = server
        self.tlsCAFile = tlsCAFile
        self.dataDirectory = dataDirectory
        self.group = group
        self.pool = pool
        self.deviceId = deviceId
        http = LinuxHTTPTransport(group: group, blockingPool: pool, tlsCAFile: tlsCAFile)
        accounts = ParseAccounts(server: server, http: http, appId: appId, installationId: deviceId)
    }

    static let help = """
    commands:
      /signup <user> <password>   /login <user> <password>
      /where <lat> <lng>          set your location      /nearby [km]   users near you
      /chat <user>                talk to <user>; then type a line to send it
      /history                    the last messages with <user>
      /read                       mark <user>'s messages read
      /call <user>  /answer  /decline  /hangup          signalling-only calls
      /status  /quit
    """

    func say(_ line: String) {
        print(line)
    }

    /// Handles one input line; false to quit.
    func handle(_ line: String) async -> Bool {
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let command = words.first else { return true }
        do {
            switch command {
            case "/quit":
                await client?.shutdown()
                say("bye")
                return false
            case "/help":
                say(Self.help)
            case "/signup", "/login":
                guard words.count == 3 else { say("usage: \(command) <user> <password>"); return true }
                let session = command == "/signup"
                    ? try await accounts.signUp(words[1], password: words[2])
                    : try await accounts.logIn(words[1], password: words[2])
                try await start(session)
            case "/where":
                guard words.count == 3, let lat = Double(words[1]), let lng = Double(words[2]) else { say("usage: /where <lat> <lng>"); return true }
                let session = try requireSession()
                try await accounts.setLocation(session, latitude: lat, longitude: lng)
                location = (lat, lng)
                say("* location set")
            case "/nearby":
                let session = try requireSession()
                guard let location else { say("* set your location first: /where <lat> <lng>"); return true }
                let km = words.count > 1 ? Double(words[1]) ?? 10 : 10
                let users = try await accounts.nearby(session, latitude: location.latitude, longitude: location.longitude, kilometers: km)
                    .filter { $0.userId != session.userId }
                for user in users { names[user.userId] = user.username }
                say(users.isEmpty ? "* nobody within \(km) km" : "* nearby: " + users.map(\.username).joined(separator: ", "))
            case "/chat":
                guard words.count == 2 else { say("usage: /chat <user>"); return true }
                let session = try requireSession()
                guard let user = try await accounts.user(named: words[1], session: session) else { say("* no user \(words[1])"); return true }
                partner = user
                names[user.userId] = user.username
                let refused = try await client?.subscribePresence([user.userId]) ?? []
                partnerPresencePending = !refused.isEmpty
                say("* chatting with \(user.username)")
                if partnerPresencePending { say("* \(user.username)'s presence shows once they have written to you") }
            case "/history":
                guard let partner, let client else { say("* /chat <user> first"); return true }
                let page = try await client.rest().history(with: partner.userId, limit: 20)
                for message in page.reversed() { say("  \(name(message.from)): \(message.text)") }
                say("* \(page.count) messages")
            case "/read":
                guard !unread.isEmpty else { say("* nothing unread"); return true }
                try await client?.markRead(unread)
                say("* marked \(unread.count) read")
                unread = []
            case "/call":
                guard words.count == 2, let client else { say("usage: /call <user> (after /login)"); return true }
                let session = try requireSession()
                guard let user = try await accounts.user(named: words[1], session: session) else { say("* no user \(words[1])"); return true }
                names[user.userId] = user.username
                let call = try await client.callUser(withId: user.userId, headers: ["app": "parley-chat"], sdp: "v=0 (signalling only)")
                watch(call)
                say("* calling \(user.username)")
            case "/answer":
                guard let call, call.direction == .incoming else { say("* no incoming call"); return true }
                try await call.answer(sdp: "v=0 (signalling only answer)")
                try await call.reportEstablished()
            case "/decline":
                guard let call else { say("* no call"); return true }
                try await call.decline()
            case "/hangup":
                guard let call else { say("* no call"); return true }
                try await call.hangup()
            case "/status":
                let state = await client?.connectionState ?? .idle
                say("* \(session?.username ?? "not logged in") on \(deviceId): \(Self.describe(state))")
            default:
                if command.hasPrefix("/") { say("* unknown command \(command) (/help)"); return true }
                guard let partner, let client else { say("* /chat <user> first"); return true }
                let clientMessageId = try await client.send(OutgoingMessage(to: [partner.userId], text: line))
                sentTexts[clientMessageId] = line
                if case .connected = await client.connectionState {} else { say("  queued: \(line)") }
            }
        } catch {
            say("! \(error)")
        }
        return true
    }

    private func start(_ session: ParseAccounts.Session) async throws {
        await client?.shutdown()
        self.session = session
        names[session.userId] = session.username
        let configuration = ParleyClientConfiguration(serverURL: server, deviceId: deviceId)
        let storage = FileStorage(directory: dataDirectory + "/" + session.userId, runner: BlockingPoolRunner(pool: pool))
        let client = ParleyClient(configuration: configuration, transport: LinuxTransport(group: group, blockingPool: pool, tlsCAFile: tlsCAFile),
                                  storage: storage, http: http)
        self.client = client
        await client.setDelegate(self)
        try await client.connect(sessionToken: session.token)
        try await client.waitUntilConnected()
        say("* logged in as \(session.username)")
    }

    private func requireSession() throws(ParleyError) -> ParseAccounts.Session {
        guard let session else { throw .notConnected }
        return session
    }

    private func name(_ userId: String) -> String { names[userId] ?? userId }

    /// Looks a user's name up once (for senders and callers not met in this run yet).
    private func learnName(_ userId: String) async {
        guard names[userId] == nil, let session, let user = try? await accounts.user(id: userId, session: session) else { return }
        names[userId] = user.username
    }

    private func watch(_ call: Call) {
        self.call = call
        Task {
            for await event in call.events { self.show(event, of: call) }
        }
    }

    private func show(_ event: CallEvent, of call: Call) {
        switch event {
        case .stateChanged(let state) where state != .ended:
            say("* call \(state.rawValue)")
        case .ended(let cause, let error, _):
            say("* call ended: \(cause.rawValue)\(error.map { " (\($0))" } ?? "")")
            if self.call === call { self.call = nil }
        default:
            break
        }
    }

    static func describe(_ state: ParleyConnectionState) -> String {
        switch state {
        case .idle: "idle"
        case .connecting: "connecting"
        case .connected: "connected"
        case .waitingToReconnect(let ms): "reconnecting in \(ms) ms"
        case .stopped(let error): "stopped\(error.map { ": \($0)" } ?? "")"
        }
    }

    // MARK: ParleyClientDelegate

    func parleyClient(_ client: ParleyClient, didReceive message: ChatMessage) async {
        await learnName(message.from)
        if message.from == session?.userId {
            say("  (you, other device): \(message.text)")
        } else {
            say("[\(name(message.from))] \(message.text)")
            unread.append(message.messageId)
            if partnerPresencePending, message.from == partner?.userId {
                partnerPresencePending = false
                _ = try? await client.subscribePresence([message.from])
            }
        }
    }

    func parleyClient(_ client: ParleyClient, didSend clientMessageId: String, result: Result<SentMessage, ParleyError>) async {
        let text = sentTexts[clientMessageId] ?? "(queued before a restart)"
        switch result {
        case .success(let sent):
            sentTexts[sent.messageId] = text
            say("  sent: \(text)")
        case .failure(let error):
            say("! not sent: \(text): \(error)")
        }
    }

    func parleyClient(_ client: ParleyClient, didReceive receipt: Receipt) async {
        await learnName(receipt.userId)
        say("  \(receipt.kind.rawValue) by \(name(receipt.userId)): \(sentTexts[receipt.messageId] ?? receipt.messageId)")
    }

    func parleyClient(_ client: ParleyClient, didReceivePresence presence: Presence) async {
        say("* \(name(presence.userId)) is \(presence.online ? "online" : "offline")")
    }

    func parleyClient(_ client: ParleyClient, didReceiveTyping typing: TypingIndicator) async {}

    func parleyClient(_ client: ParleyClient, didChangeConnectionState state: ParleyConnectionState) async {
        switch state {
        case .waitingToReconnect, .stopped: say("* connection: \(Self.describe(state))")
        default: break
        }
    }

    func parleyClient(_ client: ParleyClient, didReceiveIncomingCall call: Call) async {
        await learnName(call.remoteUserId)
        watch(call)
        say("* incoming call from \(name(call.remoteUserId)) (/answer or /decline)")
    }
}
