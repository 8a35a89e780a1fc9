import ParleyJSON

/// The client of one device (the Sinch `SINClient` counterpart): messages, receipts, presence,
/// typing and calls over one socket, with a durable outbox and cursor.
///
/// A thin executor around `ParleyClientStateMachine`: it feeds the machine socket events,
/// storage completions and the clock, and runs its actions. Three tasks keep order: socket
/// events, storage jobs (one at a time, removals merged) and deliveries to the app (one at a
/// time; an event is processed when its delegate method returned).
public actor ParleyClient {
    public nonisolated let configuration: ParleyClientConfiguration
    /// Live calls by id and by CallKit UUID.
    public nonisolated let calls = CallRegistry()

    private let transport: any ParleyTransport
    private let storage: any ParleyStorage
    private let http: (any ParleyHTTPTransport)?
    private var machine: ParleyClientStateMachine?
    private var loading: Task<ParleyStoredState, any Error>?
    private let random: SplitMix64
    private var sessionToken: String?
    private var socket: (any ParleySocket)?
    private let socketEvents: AsyncStream<ParleySocketEvents.SocketEvent>.Continuation
    private var delegate: (any ParleyClientDelegate)?
    private var media: (any CallMediaSession)?

    private let origin = ContinuousClock.now
    private var timer: Task<Void, Never>?
    private var timerDeadline: Int64?

    private var nextToken: UInt64 = 1
    private var requestWaiters: [UInt64: CheckedContinuation<JSONObject, any Error>] = [:]
    private var sendWaiters: [String: [CheckedContinuation<SentMessage, any Error>]] = [:]
    private var storedWaiters: [String: CheckedContinuation<Void, any Error>] = [:]
    private var storageBusy = false
    private var storageIdleWaiters: [CheckedContinuation<Void, Never>] = []
    private var connectionWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]

    private var storageQueue: [StorageJob] = []
    private let storageWake: AsyncStream<Void>.Continuation
    private let deliveries: AsyncStream<Delivery>.Continuation
    private var tasks: [Task<Void, Never>] = []

    enum StorageJob: Sendable {
        case append([OutboxEntry])
        case remove([String])
        case cursor(CursorRecord)
    }

    enum Delivery: Sendable {
        case event(IncomingEvent)
        case sent(String, Result<SentMessage, ParleyError>)
        case state(ParleyConnectionState)
        case gap
        case callEvents(Call, [CallEvent])
    }

    /// A client for `configuration.deviceId`. `http` serves `rest()` (history, TURN).
    public init(configuration: ParleyClientConfiguration, transport: any ParleyTransport, storage: any ParleyStorage,
                http: (any ParleyHTTPTransport)? = nil, random: SplitMix64 = SplitMix64()) {
        self.configuration = configuration
        self.transport = transport
        self.storage = storage
        self.http = http
        self.random = random
        let (events, eventSink) = AsyncStream.makeStream(of: ParleySocketEvents.SocketEvent.self)
        socketEvents = eventSink
        let (wakes, wakeSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        storageWake = wakeSink
        let (deliveryStream, deliverySink) = AsyncStream.makeStream(of: Delivery.self)
        deliveries = deliverySink
        Task { await self.startTasks(events: events, wakes: wakes, deliveries: deliveryStream) }
    }

    private func startTasks(events: AsyncStream<ParleySocketEvents.SocketEvent>, wakes: AsyncStream<Void>,
                            deliveries deliveryStream: AsyncStream<Delivery>) {
        tasks.append(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.handle(event)
            }
        })
        tasks.append(Task { [weak self] in
            for await _ in wakes {
                guard let self else { return }
                await self.runStorageJobs()
            }
        })
        tasks.append(Task { [weak self] in
            for await delivery in deliveryStream {
                guard let self else { return }
                await self.deliver(delivery)
            }
        })
    }

    /// Receives the client's events (kept strongly until `shutdown`).
    public func setDelegate(_ delegate: (any ParleyClientDelegate)?) {
        self.delegate = delegate
    }

    /// The app's WebRTC stack for calls.
    public func setMediaSession(_ media: (any CallMediaSession)?) {
        self.media = media
    }

    // MARK: Connection

    /// Connects (and keeps reconnecting) with `sessionToken`; returns at once. Stored state
    /// (cursor, outbox) is loaded first.
    public func connect(sessionToken: String) async throws(ParleyError) {
        try await ensureLoaded()
        self.sessionToken = sessionToken
        run { $0.start(sessionToken: sessionToken, now: $1) }
    }

    /// Closes the socket and stops reconnecting.
    public func disconnect() async {
        guard machine != nil else { return }
        run { $0.stop(now: $1) }
    }

    /// Stops the client and its tasks for good (the object can then be released), after the
    /// storage writes under way are done.
    public func shutdown() async {
        await disconnect()
        if storageBusy || !storageQueue.isEmpty {
            await withCheckedContinuation { storageIdleWaiters.append($0) }
        }
        for task in tasks { task.cancel() }
        tasks = []
        socketEvents.finish()
        storageWake.finish()
        deliveries.finish()
        timer?.cancel()
    }

    /// Waits until the session is open; throws if the client stops (or `timeout` passes).
    public func waitUntilConnected(timeout: Duration = .seconds(30)) async throws(ParleyError) {
        try await ensureLoaded()
        if case .connected = machine!.connectionState { return }
        if case .stopped(let error) = machine!.connectionState { throw error ?? .stopped }
        let token = makeToken()
        let timeoutTask = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            await self?.failConnectionWaiter(token, .timedOut)
        }
        defer { timeoutTask.cancel() }
        try await withParleyContinuation { connectionWaiters[token] = $0 }
    }

    public var connectionState: ParleyConnectionState { machine?.connectionState ?? .idle }

    /// Messages not yet acknowledged by the server, oldest first.
    public var pendingOutbox: [OutboxEntry] { machine?.outbox ?? [] }

    /// The highest seq the app processed and the client stored.
    public var storedCursor: Int64 { machine?.storedSeq ?? 0 }

    /// The REST endpoints with this client's session (needs `http`).
    public func rest() throws(ParleyError) -> ParleyREST {
        guard let http, let sessionToken else { throw .notConnected }
        return ParleyREST(server: configuration.serverURL, http: http, sessionToken: sessionToken)
    }

    // MARK: Messages

    /// Puts a message in the outbox and returns its `clientMessageId` once it is stored (it
    /// then survives a crash); it is sent (again after reconnects and restarts) until the
    /// server stores it, and `didSend` tells the result.
    @discardableResult
    public func send(_ message: OutgoingMessage) async throws(ParleyError) -> String {
        try await ensureLoaded()
        let clientMessageId = ParleyUUID.random().uuidString
        let now = self.now
        let actions = try machine!.enqueue(message, clientMessageId: clientMessageId, now: now)
        try await withParleyContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            storedWaiters[clientMessageId] = continuation
            execute(actions)
        }
        return clientMessageId
    }

    /// Sends and waits for the server's acknowledgement (or final refusal).
    public func sendAndWait(_ message: OutgoingMessage) async throws(ParleyError) -> SentMessage {
        try await ensureLoaded()
        let clientMessageId = ParleyUUID.random().uuidString
        let now = self.now
        let actions = try machine!.enqueue(message, clientMessageId: clientMessageId, now: now)
        return try await withParleyContinuation { continuation in
            sendWaiters[clientMessageId, default: []].append(continuation)
            execute(actions)
        }
    }

    /// Marks messages read; held while offline.
    public func markRead(_ messageIds: [String]) async throws(ParleyError) {
        guard !messageIds.isEmpty else { return }
        try await ensureLoaded()
        _ = try await awaitRequest { machine, token, now in machine.markRead(messageIds, token: token, now: now) }
    }

    /// Tells `userId` this user is typing (or stopped); best effort.
    public func setTyping(to userId: String, active: Bool) async {
        guard machine != nil else { return }
        run { machine, _ in machine.typing(to: userId, active: active) }
    }

    /// Watches the presence of `users`; `didReceivePresence` tells each one's state, then changes.
    /// Watches the presence of `users`; returns those the server refused (`not_a_contact` under
    /// its default `contacts` scope: a user's presence reaches only users it has written to or called).
    @discardableResult
    public func subscribePresence(_ users: [String]) async throws(ParleyError) -> [FailedRecipient] {
        try await ensureLoaded()
        let answer = try await awaitRequest { machine, token, now in machine.subscribePresence(users, token: token, now: now) }
        return FailedRecipient.list(answer["failed"])
    }

    public func unsubscribePresence(_ users: [String]) async throws(ParleyError) {
        try await ensureLoaded()
        _ = try await awaitRequest { machine, token, now in machine.unsubscribePresence(users, token: token, now: now) }
    }

    /// Sends a request frame of `type` and returns the server's `ok` (an `error` throws).
    public func request(type: String, fields: JSONObject) async throws(ParleyError) -> JSONObject {
        try await ensureLoaded()
        return try await awaitRequest { machine, token, now in machine.request(type: type, fields: fields, token: token, now: now) }
    }

    // MARK: Calls

    /// Calls `userId`: the offer comes from `sdp`, else from the media session. The `Call`
    /// reports its progress; a refused invite ends it with `failure` and throws.
    public func callUser(withId userId: String, headers: JSONObject = [:], video: Bool = false,
                         sdp: String? = nil) async throws(ParleyError) -> Call {
        let call = Call(callId: ParleyUUID.random().uuidString, direction: .outgoing, remoteUserId: userId, video: video,
                        headers: headers, client: self)
        _ = calls.register(call)
        let offer: String
        if let sdp {
            offer = sdp
        } else if let media {
            do {
                offer = try await media.makeOffer(for: call)
            } catch {
                applyLocal(call, .ended(.failure, error: "no_offer", details: nil))
                throw .invalidArgument("the media session gave no offer: \(error)")
            }
        } else {
            applyLocal(call, .ended(.failure, error: "no_offer", details: nil))
            throw .invalidArgument("no sdp and no media session")
        }
        do {
            _ = try await callRequest("call.invite", callId: call.callId, fields: [
                "to": .string(userId), "sdp": .string(offer), "video": .bool(video), "headers": .object(headers),
            ])
        } catch {
            if case .server(let code, _) = error {
                applyLocal(call, .ended(.failure, error: code, details: nil))
            } else {
                applyLocal(call, .ended(.failure, error: "not_sent", details: nil))
            }
            throw error
        }
        return call
    }

    /// An incoming call from a VoIP push, to report to CallKit before the socket is up. The
    /// queued `call.incoming` (after `connect`) completes it; if none arrives by `expiresAt`
    /// (or 15 s after the session opened) it ends with `timeout` / `call_not_delivered`.
    public nonisolated func incomingCall(fromPush payload: VoIPPushPayload) -> Call {
        let created = Call(callId: payload.callId, direction: .incoming, remoteUserId: payload.from, video: payload.video,
                           headers: payload.headersOmitted ? [:] : payload.headers, client: self)
        guard let call = calls.register(created) else {
            // Ended already (the replay told us): report it and end it at once.
            created.applyPush(payload)
            let events = created.applyLocal(.ended(.canceled, error: nil, details: nil))
            created.publish(events)
            return created
        }
        call.applyPush(payload)
        if call === created {
            let waitMilliseconds = payload.expiresAt.flatMap(WallClock.parse).map { $0 - WallClock.nowMilliseconds() } ?? 60_000
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(max(0, waitMilliseconds)))
                await self?.endUndelivered(call)
            }
        }
        return call
    }

    func callRequest(_ type: String, callId: String, fields: JSONObject, waitForConnection: Bool = false) async throws(ParleyError) -> JSONObject {
        try await ensureLoaded()
        if waitForConnection { try await waitUntilConnected() }
        var fields = fields
        fields["callId"] = .string(callId)
        return try await awaitRequest { machine, token, now in
            machine.request(type: type, fields: fields, token: token, now: now)
        }
    }

    func applyLocal(_ call: Call, _ change: Call.LocalChange) {
        let events = call.applyLocal(change)
        if call.state == .ended { calls.ended(call) }
        if !events.isEmpty { deliveries.yield(.callEvents(call, events)) }
    }

    private func endUndelivered(_ call: Call) {
        if call.state == .initiating { applyLocal(call, .ended(.timeout, error: "call_not_delivered", details: nil)) }
    }

    /// Routes a call event to its call (creating an incoming one); returns what to publish.
    private func route(type: String, fields: JSONObject) -> (call: Call, events: [CallEvent], isNew: Bool)? {
        guard let callId = fields["callId"]?.string else { return nil }
        if let call = calls.call(id: callId) {
            let events = call.apply(type: type, fields: fields)
            if call.state == .ended { calls.ended(call) }
            return (call, events, false)
        }
        guard type == "call.incoming", !calls.hasEnded(callId), let from = fields["from"]?.string else { return nil }
        if let expiresAt = fields["expiresAt"]?.string.flatMap(WallClock.parse), expiresAt <= WallClock.nowMilliseconds() { return nil }
        let created = Call(callId: callId, direction: .incoming, remoteUserId: from, video: fields["video"]?.bool ?? false,
                           headers: fields["headers"]?.object ?? [:], client: self)
        guard let call = calls.register(created) else { return nil }
        let events = call.apply(type: type, fields: fields)
        return (call, events, call === created)
    }

    // MARK: Executor

    private var now: Int64 {
        let (seconds, attoseconds) = (ContinuousClock.now - origin).components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    private func makeToken() -> UInt64 {
        defer { nextToken += 1 }
        return nextToken
    }

    private func ensureLoaded() async throws(ParleyError) {
        if machine != nil { return }
        let task: Task<ParleyStoredState, any Error>
        if let loading {
            task = loading
        } else {
            let storage = self.storage
            task = Task { try await storage.load() }
            loading = task
        }
        let state: ParleyStoredState
        do {
            state = try await task.value
        } catch {
            loading = nil
            throw (error as? ParleyError) ?? .storage(operation: "load", errno: 0)
        }
        if machine == nil {
            machine = ParleyClientStateMachine(configuration: configuration, stored: state, random: random)
        }
    }

    private func run(_ body: (inout ParleyClientStateMachine, Int64) -> [ParleyClientStateMachine.Action]) {
        guard machine != nil else { return }
        let now = self.now
        let actions = body(&machine!, now)
        execute(actions)
    }

    private func awaitRequest(_ body: (inout ParleyClientStateMachine, UInt64, Int64) -> [ParleyClientStateMachine.Action]) async throws(ParleyError) -> JSONObject {
        let token = makeToken()
        return try await withParleyContinuation { continuation in
            requestWaiters[token] = continuation
            let now = self.now
            let actions = body(&machine!, token, now)
            execute(actions)
        }
    }

    private func execute(_ actions: [ParleyClientStateMachine.Action]) {
        for action in actions {
            switch action {
            case .openConnection(let id):
                socket = transport.open(url: configuration.serverURL, events: ParleySocketEvents(id: id, continuation: socketEvents))
            case .sendText(let text):
                socket?.send(text)
            case .sendPing:
                socket?.sendPing()
            case .closeConnection(let code, let reason):
                socket?.close(code: code, reason: reason)
                socket = nil
            case .pauseReading:
                socket?.pauseReading()
            case .resumeReading:
                socket?.resumeReading()
            case .persistOutbox(let entries):
                enqueueStorage(.append(entries))
            case .outboxStored(let ids):
                for id in ids { storedWaiters.removeValue(forKey: id)?.resume() }
            case .removeFromOutbox(let ids):
                enqueueStorage(.remove(ids))
            case .persistCursor(let cursor):
                enqueueStorage(.cursor(cursor))
            case .deliver(let event):
                deliveries.yield(.event(event))
            case .sendFinished(let clientMessageId, let result):
                if case .failure(let error) = result { storedWaiters.removeValue(forKey: clientMessageId)?.resume(throwing: error) }
                for waiter in sendWaiters.removeValue(forKey: clientMessageId) ?? [] { waiter.resume(with: result) }
                deliveries.yield(.sent(clientMessageId, result))
            case .requestFinished(let token, let result):
                requestWaiters.removeValue(forKey: token)?.resume(with: result)
            case .stateChanged(let state):
                stateChanged(state)
            case .gap:
                deliveries.yield(.gap)
            }
        }
        rearmTimer()
    }

    private func stateChanged(_ state: ParleyConnectionState) {
        deliveries.yield(.state(state))
        switch state {
        case .connected:
            let waiters = connectionWaiters
            connectionWaiters = [:]
            for waiter in waiters.values { waiter.resume() }
            for call in calls.liveCalls where call.direction == .incoming && call.state == .initiating {
                Task { [weak self] in
                    try? await Task.sleep(for: .seconds(15))
                    await self?.endUndelivered(call)
                }
            }
        case .stopped(let error):
            let waiters = connectionWaiters
            connectionWaiters = [:]
            for waiter in waiters.values { waiter.resume(throwing: error ?? .stopped) }
        default:
            break
        }
    }

    private func failConnectionWaiter(_ token: UInt64, _ error: ParleyError) {
        connectionWaiters.removeValue(forKey: token)?.resume(throwing: error)
    }

    private func rearmTimer() {
        guard let deadline = machine?.nextDeadline else { return }
        if let armed = timerDeadline, armed <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        let delay = max(0, deadline - now)
        timer = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(delay))
            guard !Task.isCancelled else { return }
            await self?.timerFired()
        }
    }

    private func timerFired() {
        timerDeadline = nil
        timer = nil
        run { $0.tick(now: $1) }
    }

    private func handle(_ event: ParleySocketEvents.SocketEvent) {
        guard machine != nil else { return }
        switch event {
        case .opened(let id):
            run { $0.socketOpened(id: id, now: $1) }
        case .text(let id, let text):
            run { $0.received(text, id: id, now: $1) }
        case .activity(let id):
            let now = self.now
            machine!.socketActivity(id: id, now: now)
        case .closed(let id, let code, let reason):
            if id == machine!.connectionID { socket = nil }
            run { $0.socketClosed(id: id, code: code, reason: reason, now: $1) }
        }
    }

    // MARK: Storage task

    private func enqueueStorage(_ job: StorageJob) {
        storageQueue.append(job)
        storageWake.yield()
    }

    private func takeStorageJobs() -> [StorageJob] {
        defer { storageQueue = [] }
        return storageQueue
    }

    private func runStorageJobs() async {
        storageBusy = true
        defer {
            storageBusy = false
            let waiters = storageIdleWaiters
            storageIdleWaiters = []
            for waiter in waiters { waiter.resume() }
        }
        while true {
            let jobs = takeStorageJobs()
            guard !jobs.isEmpty else { return }
            var index = 0
            while index < jobs.count {
                switch jobs[index] {
                case .append(let entries):
                    do {
                        try await storage.appendOutbox(entries)
                        run { $0.outboxPersisted(now: $1) }
                    } catch {
                        run { $0.outboxPersistFailed(error, now: $1) }
                    }
                case .remove(var ids):
                    // Consecutive removals (one per `ok`) become one write.
                    while index + 1 < jobs.count, case .remove(let more) = jobs[index + 1] {
                        ids.append(contentsOf: more)
                        index += 1
                    }
                    try? await storage.removeOutbox(ids)
                case .cursor(let cursor):
                    do {
                        try await storage.saveCursor(cursor)
                        run { $0.cursorPersisted(cursor.seq, now: $1) }
                    } catch {
                        run { $0.cursorPersistFailed(now: $1) }
                    }
                }
                index += 1
            }
        }
    }

    // MARK: Delivery task

    private func deliver(_ delivery: Delivery) async {
        let delegate = self.delegate
        switch delivery {
        case .event(let event):
            switch event {
            case .message(let message): await delegate?.parleyClient(self, didReceive: message)
            case .receipt(let receipt): await delegate?.parleyClient(self, didReceive: receipt)
            case .presence(let presence): await delegate?.parleyClient(self, didReceivePresence: presence)
            case .typing(let typing): await delegate?.parleyClient(self, didReceiveTyping: typing)
            case .other(let type, let fields): await delegate?.parleyClient(self, didReceiveEvent: type, fields: fields)
            case .call(let type, let fields):
                if let routed = route(type: type, fields: fields) {
                    if routed.isNew { await delegate?.parleyClient(self, didReceiveIncomingCall: routed.call) }
                    await publish(routed.call, routed.events)
                    if routed.events.contains(where: { if case .remoteDescription(_, .offer) = $0 { true } else { false } }) {
                        ring(routed.call)
                    }
                }
            }
            run { $0.eventProcessed(now: $1) }
        case .sent(let clientMessageId, let result):
            await delegate?.parleyClient(self, didSend: clientMessageId, result: result)
        case .state(let state):
            await delegate?.parleyClient(self, didChangeConnectionState: state)
        case .gap:
            await delegate?.parleyClientDidDetectGap(self)
        case .callEvents(let call, let events):
            await publish(call, events)
        }
    }

    private func publish(_ call: Call, _ events: [CallEvent]) async {
        call.publish(events)
        guard let media else { return }
        for event in events {
            switch event {
            case .remoteDescription(let sdp, let kind): await media.setRemoteDescription(sdp, kind: kind, for: call)
            case .remoteCandidates(let candidates): await media.addRemoteCandidates(candidates, for: call)
            case .ended: await media.close(call)
            case .stateChanged: break
            }
        }
    }

    /// Tells the caller this device rings (the offer arrived), as Sinch's SDK does.
    private func ring(_ call: Call) {
        Task { [weak self] in
            guard let self else { return }
            if (try? await self.callRequest("call.ringing", callId: call.callId, fields: [:])) != nil {
                await self.applyLocal(call, .ringing)
            }
        }
    }
}
