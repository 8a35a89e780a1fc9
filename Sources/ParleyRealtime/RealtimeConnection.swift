import ParleyJSON
import ParleyLog
import ParleyNet
import ParleyWebSocket

/// One `/v1/socket` connection: runs `RealtimeSessionStateMachine` on a `WebSocketHandler`,
/// talks to the database, and receives events pushed by the batchers and other nodes.
///
/// Thread confinement: owned by `loop` (the socket's loop). Methods other than `send(frame:)`
/// and `closeSession(code:reason:)` must be called on it (checked); other threads hop with
/// `loop.execute`. `@unchecked Sendable` so the registry can hand references across loops.
public final class RealtimeConnection: WebSocketDelegate, @unchecked Sendable {
    public let loop: EventLoop
    /// Unique per node and process (recorded with the device to tell connections apart).
    public let connectionID: UInt64
    private let service: RealtimeService
    private var socket: WebSocketHandler?
    private var machine: RealtimeSessionStateMachine
    private var helloTimer: TimerID?
    /// When the session token expires (Unix ms; the connection closes then), and the timer that closes it.
    private var sessionExpiresAt = Int64.max
    private var expiryTimer: TimerID?
    private var key: DeviceKey?
    /// Hash of the session token (to close this connection when that session is revoked).
    private var sessionTokenHash: Int?
    private var registered = false
    private var deviceRecorded = false
    private var pendingRequests = 0
    private var lastAcknowledged: Int64 = 0
    private var subscriptions: [String] = []
    private var typingTokens: Double = 0
    private var typingAt: UInt64 = 0

    init(service: RealtimeService, loop: EventLoop, connectionID: UInt64) {
        self.service = service
        self.loop = loop
        self.connectionID = connectionID
        machine = RealtimeSessionStateMachine(limits: service.frameLimits, maxHeldFrames: min(64, service.configuration.maxPendingRequests))
    }

    /// The device once the session is open (loop thread).
    public var device: DeviceKey? {
        loop.preconditionInEventLoop()
        return machine.phase == .open ? key : nil
    }

    /// Sends an encoded frame (any thread; dropped if the session is not open).
    public func send(frame: [UInt8]) {
        if loop.inEventLoop {
            guard machine.phase == .open else { return }
            socket?.send(encodedFrame: frame)
        } else {
            loop.execute { [self] in send(frame: frame) }
        }
    }

    /// Sends an encoded frame unless this session's user is in `users` (any thread).
    func send(frame: [UInt8], unlessUserIn users: Set<String>) {
        loop.execute { [self] in
            guard let key, !users.contains(key.userId) else { return }
            send(frame: frame)
        }
    }

    /// Closes the session with a close code (any thread), e.g. 4006 when the session is revoked.
    public func closeSession(code: UInt16, reason: String) {
        guard loop.inEventLoop else {
            loop.execute { [self] in closeSession(code: code, reason: reason) }
            return
        }
        machine.closed()
        socket?.close(code: WebSocketCloseCode(code), reason: reason)
    }

    // MARK: WebSocketDelegate

    public func webSocketDidOpen(_ socket: WebSocketHandler) {
        self.socket = socket
        helloTimer = loop.schedule(after: service.configuration.helloTimeout) { [weak self] in
            guard let self else { return }
            helloTimer = nil
            perform(machine.helloTimedOut())
        }
    }

    public func webSocket(_ socket: WebSocketHandler, didReceiveText text: String) {
        // The timer may fire a little late: a frame after the expiry is never handled.
        if sessionExpiresAt != .max, UTCTime.nowMilliseconds() >= sessionExpiresAt {
            return perform(machine.sessionExpired())
        }
        perform(machine.receivedText(text))
    }

    public func webSocketDidDrain(_ socket: WebSocketHandler) {
        if let action = machine.outboundDrained() { perform([action]) }
    }

    public func webSocket(_ socket: WebSocketHandler, didClose code: WebSocketCloseCode, reason: String) {
        machine.closed()
        if let helloTimer { loop.cancel(helloTimer) }
        helloTimer = nil
        if let expiryTimer { loop.cancel(expiryTimer) }
        expiryTimer = nil
        self.socket = nil
        if !subscriptions.isEmpty {
            service.registry.unsubscribe(self, from: subscriptions)
            subscriptions = []
        }
        guard let key else { return }
        if registered {
            registered = false
            if let subscribers = service.registry.unregister(self, as: key) {
                service.presenceChanged(userId: key.userId, online: false, localSubscribers: subscribers)
            }
        }
        service.connectionClosed(self, device: key)
        if deviceRecorded {
            deviceRecorded = false
            service.queue.deviceDisconnected(key, connectionID: connectionID)
        }
    }

    // MARK: Actions

    private func perform(_ actions: [RealtimeSessionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .send(let frame):
                socket?.send(encodedFrame: frame)
            case .close(let code, let reason):
                socket?.close(code: WebSocketCloseCode(code), reason: reason)
            case .authenticate(let hello):
                if let helloTimer { loop.cancel(helloTimer) }
                helloTimer = nil
                authenticate(hello)
            case .handle(let frame):
                handle(frame)
            case .fetch(let after):
                fetch(after: after)
            }
        }
    }

    private func reply(_ frame: [UInt8]) {
        socket?.send(encodedFrame: frame)
    }

    private func checkOutbound() {
        if let socket, socket.pendingOutboundBytes > service.configuration.outboundHighWater {
            machine.outboundBlocked()
        }
    }

    // MARK: Hello

    private func authenticate(_ hello: HelloFrame) {
        Task(executorPreference: loop) { [self] in
            let identity: RealtimeIdentity?
            do {
                identity = try await service.authenticator.authenticate(sessionToken: hello.sessionToken)
            } catch {
                service.logger.warning("session lookup failed", [("error", "\(error)")])
                perform(machine.authenticationFailed(.unavailable, "the database is unavailable; retry later",
                                                     closeCode: WebSocketCloseCode.tryAgainLater.rawValue))
                return
            }
            guard machine.phase == .authenticating else { return }
            guard let identity else {
                perform(machine.authenticationFailed(.invalidSession, "invalid session token", closeCode: RealtimeCloseCode.invalidSession))
                return
            }
            let userId = identity.userId
            sessionExpiresAt = identity.sessionExpiresAt
            let key = DeviceKey(userId: userId, deviceId: hello.deviceId)
            self.key = key
            sessionTokenHash = hello.sessionToken.hashValue
            let registration = service.registry.register(self, as: key)
            registered = true
            if let replaced = registration.replaced, replaced !== self {
                replaced.loop.execute { replaced.replacedByNewerConnection() }
            }
            if registration.cameOnline {
                service.presenceChanged(userId: userId, online: true, localSubscribers: registration.subscribers)
            }
            let state: DeliveryQueue.DeviceState
            do throws(RealtimeFailure) {
                state = try await service.queue.registerDevice(key, connectionID: connectionID,
                                                               maxDevices: service.configuration.maxDevicesPerUser)
            } catch {
                if registered, let subscribers = service.registry.unregister(self, as: key) {
                    service.presenceChanged(userId: userId, online: false, localSubscribers: subscribers)
                }
                registered = false
                let close: UInt16 = switch error.code {
                case .tooManyDevices: RealtimeCloseCode.tooManyDevices
                case .unavailable: WebSocketCloseCode.tryAgainLater.rawValue
                default: WebSocketCloseCode.internalError.rawValue
                }
                perform(machine.authenticationFailed(error.code, error.message, closeCode: close))
                return
            }
            guard machine.phase == .authenticating else {
                // Closed or replaced while registering: the disconnect must be recorded after the registration.
                if socket == nil {
                    service.queue.deviceDisconnected(key, connectionID: connectionID)
                } else {
                    deviceRecorded = true
                }
                return
            }
            deviceRecorded = true
            perform(machine.authenticated(userId: userId, deviceId: hello.deviceId, resumeAfter: hello.resumeAfter,
                                          lastSeq: state.lastSeq, trimmedSeq: state.trimmedSeq))
            guard machine.phase == .open else { return }
            service.connectionOpened(self, device: key)
            armExpiry()
        }
    }

    /// Closes the connection with 4007 when its session expires (at once if it already has).
    private func armExpiry() {
        let remaining = sessionExpiresAt - UTCTime.nowMilliseconds()
        guard remaining > 0 else { return perform(machine.sessionExpired()) }
        expiryTimer = loop.schedule(after: .milliseconds(remaining)) { [weak self] in
            guard let self else { return }
            expiryTimer = nil
            perform(machine.sessionExpired())
        }
    }

    /// The session ended (revoked, user banned or deleted): close with 4006 if this connection
    /// was opened with `token` (any session when nil). Loop thread.
    func sessionEnded(token: String?) {
        loop.preconditionInEventLoop()
        guard token == nil || token?.hashValue == sessionTokenHash else { return }
        closeSession(code: RealtimeCloseCode.sessionRevoked, reason: "session ended")
    }

    /// A newer connection of the same device registered (on this node or another).
    func replacedByNewerConnection() {
        loop.preconditionInEventLoop()
        perform(machine.replaced())
    }

    // MARK: Delivery

    /// An event committed for this device (loop thread).
    func deliver(seq: Int64, frame: [UInt8]) {
        switch machine.liveEvent(seq: seq) {
        case .send:
            socket?.send(encodedFrame: frame)
            checkOutbound()
        case .skip:
            break
        case .fetch(let after):
            fetch(after: after)
        }
    }

    /// Another node committed events up to `seq` for this device (loop thread).
    func hint(seq: Int64) {
        if let action = machine.hinted(seq: seq) { perform([action]) }
    }

    /// Notifications may have been lost: read the queue (loop thread).
    func resynchronize() {
        if let action = machine.resynchronize() { perform([action]) }
    }

    private func fetch(after: Int64) {
        guard let key else { return }
        let limit = service.configuration.replayPageSize
        Task(executorPreference: loop) { [self] in
            let rows: [(seq: Int64, body: QueuedEventBody?)]
            do throws(RealtimeFailure) {
                rows = try await service.queue.events(for: key, after: after, limit: limit)
            } catch {
                machine.fetchFailed()
                loop.schedule(after: .seconds(1)) { [weak self] in
                    guard let self, let action = machine.retryFetch() else { return }
                    perform([action])
                }
                return
            }
            for row in rows {
                if machine.replayEvent(seq: row.seq) {
                    if let body = row.body {
                        socket?.send(encodedFrame: ServerFrame.event(QueuedEvent(seq: row.seq, body: body)))
                        checkOutbound()
                    }
                } else if machine.blocked {
                    break
                }
            }
            if let next = machine.fetchCompleted(full: rows.count >= limit) { perform([next]) }
        }
    }

    // MARK: Requests

    private func handle(_ frame: ClientFrame) {
        guard let key else { return }
        switch frame {
        case .hello:
            break
        case .send(let id, let request):
            guard pendingRequests < service.configuration.maxPendingRequests else {
                return reply(ServerFrame.error(re: id, code: .tooManyPending, message: "too many requests waiting for an answer"))
            }
            guard service.takeSendTokens(key.userId, count: 1) else {
                return reply(ServerFrame.error(re: id, code: .rateLimited, message: "sending too fast; slow down"))
            }
            pendingRequests += 1
            service.send(request, from: key.userId, device: key.deviceId, on: loop) { [self] result in
                pendingRequests -= 1
                reply(Self.sendReply(re: id, result))
            }
        case .ack(let id, let upTo):
            let value = machine.acknowledgeable(upTo: upTo)
            guard value > lastAcknowledged else {
                if id != nil { reply(ServerFrame.ok(re: id)) }
                return
            }
            let previous = lastAcknowledged
            lastAcknowledged = value
            service.acknowledge(key, upTo: value, on: loop) { [self] result in
                switch result {
                case .success:
                    if id != nil { reply(ServerFrame.ok(re: id)) }
                case .failure(let failure):
                    lastAcknowledged = min(lastAcknowledged, previous)
                    if id != nil { reply(ServerFrame.error(re: id, code: failure.code, message: failure.message)) }
                }
            }
        case .read(let id, let messageIds):
            guard pendingRequests < service.configuration.maxPendingRequests else {
                return reply(ServerFrame.error(re: id, code: .tooManyPending, message: "too many requests waiting for an answer"))
            }
            guard service.takeSendTokens(key.userId, count: Double(max(1, messageIds.count)) / 10) else {
                return reply(ServerFrame.error(re: id, code: .rateLimited, message: "sending too fast; slow down"))
            }
            pendingRequests += 1
            Task(executorPreference: loop) { [self] in
                do throws(RealtimeFailure) {
                    _ = try await service.queue.markRead(userId: key.userId, messageIDs: messageIds)
                    pendingRequests -= 1
                    reply(ServerFrame.ok(re: id))
                } catch {
                    pendingRequests -= 1
                    reply(ServerFrame.error(re: id, code: error.code, message: error.message))
                }
            }
        case .presenceSubscribe(let id, let users):
            let fresh = Array(Set(users.filter { !subscriptions.contains($0) })).sorted()
            guard subscriptions.count + fresh.count <= service.configuration.maxSubscriptions else {
                return reply(ServerFrame.error(re: id, code: .tooManySubscriptions,
                                               message: "at most \(service.configuration.maxSubscriptions) presence subscriptions"))
            }
            guard service.configuration.presenceScope == .contacts else { return subscribe(fresh, refused: [], re: id) }
            guard pendingRequests < service.configuration.maxPendingRequests else {
                return reply(ServerFrame.error(re: id, code: .tooManyPending, message: "too many requests waiting for an answer"))
            }
            pendingRequests += 1
            Task(executorPreference: loop) { [self] in
                let allowed: Set<String>
                do throws(RealtimeFailure) {
                    allowed = try await service.contacts.reached(key.userId, among: fresh)
                } catch {
                    pendingRequests -= 1
                    return reply(ServerFrame.error(re: id, code: error.code, message: error.message))
                }
                pendingRequests -= 1
                guard machine.phase == .open else { return }
                subscribe(fresh.filter { allowed.contains($0) && !subscriptions.contains($0) }, refused: fresh.filter { !allowed.contains($0) }, re: id)
            }
        case .presenceUnsubscribe(let id, let users):
            let gone = Set(users)
            subscriptions.removeAll { gone.contains($0) }
            service.registry.unsubscribe(self, from: users)
            reply(ServerFrame.ok(re: id))
        case .typing(let id, let to, let active):
            let now = EventLoop.monotonicNanoseconds()
            let rate = service.configuration.typingRatePerSecond
            typingTokens = typingAt == 0 ? rate : min(rate, typingTokens + Double(now &- typingAt) / 1e9 * rate)
            typingAt = now
            guard typingTokens >= 1 else {
                if id != nil { reply(ServerFrame.error(re: id, code: .rateLimited, message: "typing events too fast")) }
                return
            }
            typingTokens -= 1
            // With the contacts scope, typing reaches only a user this one reached; to anyone else
            // it is dropped without a word, like every typing indicator that reaches no one.
            guard service.configuration.presenceScope == .contacts, !service.contacts.isKnown(from: key.userId, to: to) else {
                service.relayTyping(to: to, from: key.userId, active: active)
                if id != nil { reply(ServerFrame.ok(re: id)) }
                return
            }
            Task(executorPreference: loop) { [self] in
                let allowed = (try? await service.contacts.reached(to, among: [key.userId]))?.contains(key.userId) ?? false
                if allowed { service.relayTyping(to: to, from: key.userId, active: active) }
                if id != nil { reply(ServerFrame.ok(re: id)) }
            }
        case .other(let type, let id, let object):
            guard let handler = service.frameHandler(for: type) else {
                return reply(ServerFrame.error(re: id, code: .unknownType, message: "unknown frame type \"\(type)\""))
            }
            guard pendingRequests < service.configuration.maxPendingRequests else {
                return reply(ServerFrame.error(re: id, code: .tooManyPending, message: "too many requests waiting for an answer"))
            }
            pendingRequests += 1
            handler.handle(type: type, frame: object, from: self, device: key) { [self] result in
                guard loop.inEventLoop else {
                    loop.execute { [self] in handled(re: id, result) }
                    return
                }
                handled(re: id, result)
            }
        }
    }

    /// Subscribes to the presence of `users` (answering `ok`, with the `refused` ones in `failed`),
    /// then sends their current presence.
    private func subscribe(_ users: [String], refused: [String], re id: RequestID?) {
        subscriptions.append(contentsOf: users)
        let onlineHere = service.registry.subscribe(self, to: users)
        let failed: [(String, JSONValue)] = refused.isEmpty ? [] : [
            ("failed", .array(refused.map { .object(["userId": .string($0), "reason": "not_a_contact"]) })),
        ]
        reply(ServerFrame.ok(re: id, failed))
        guard !users.isEmpty else { return }
        Task(executorPreference: loop) { [self] in
            let states = await service.presenceSnapshot(users, onlineHere: onlineHere, viewer: key?.userId ?? "")
            for state in states where subscriptions.contains(state.userId) {
                reply(ServerFrame.presence(userId: state.userId, online: state.online, lastSeenAt: state.lastSeenAt))
            }
        }
    }

    /// The answer of a frame handler (loop thread).
    private func handled(re id: RequestID?, _ result: Result<[(String, JSONValue)], RealtimeFailure>) {
        pendingRequests -= 1
        switch result {
        case .success(let fields):
            if id != nil || !fields.isEmpty { reply(ServerFrame.ok(re: id, fields)) }
        case .failure(let error):
            reply(ServerFrame.error(re: id, code: error.code, message: error.message))
        }
    }

    static func sendReply(re id: RequestID, _ result: Result<SendResult, RealtimeFailure>) -> [UInt8] {
        switch result {
        case .success(let sent):
            var fields: [(String, JSONValue)] = [
                ("messageId", .string(sent.messageId)),
                ("sentAt", .string(UTCTime.iso8601(milliseconds: sent.sentAt))),
                ("failed", .array(sent.failed.map { .object(["userId": .string($0), "reason": "user_not_found"]) })),
            ]
            if sent.duplicate { fields.append(("duplicate", true)) }
            return ServerFrame.ok(re: id, fields)
        case .failure(let failure):
            var fields: [(String, JSONValue)] = []
            if !failure.failedRecipients.isEmpty {
                fields.append(("failed", .array(failure.failedRecipients.map { .object(["userId": .string($0), "reason": "user_not_found"]) })))
            }
            return ServerFrame.error(re: id, code: failure.code, message: failure.message, fields)
        }
    }
}
