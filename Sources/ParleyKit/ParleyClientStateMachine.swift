import ParleyJSON

/// The protocol rules of one device's realtime session, as a sans-I/O state machine.
///
/// Inputs (the app's calls, socket events, storage completions, the clock) go in with the
/// current monotonic time in milliseconds; actions come out, which a thin executor
/// (`ParleyClient`) runs in order. The machine owns every decision: when to connect and with
/// which `resumeAfter`, the outbox (persist first, send with a `clientMessageId`, re-send until
/// `ok`), dedupe by event key, acknowledgement only after the app processed an event and its
/// cursor was stored, reconnect backoff with jitter, pings, timeouts and the close codes that
/// stop for good. It never blocks and owns no I/O, so tests drive every frame in every state.
public struct ParleyClientStateMachine: Sendable {
    /// What the executor must do, in order.
    public enum Action: Sendable, Equatable {
        /// Open a socket tagged `id`; report `socketOpened(id)` / `socketClosed(id, …)`.
        case openConnection(id: Int)
        /// Send a text frame on the current connection.
        case sendText(String)
        /// Send a WebSocket ping on the current connection.
        case sendPing
        /// Close the current connection; its later close event is ignored.
        case closeConnection(code: Int, reason: String)
        /// Stop reading from the socket (the app is behind) / read again.
        case pauseReading
        case resumeReading
        /// Store these outbox entries, then report `outboxPersisted()` (or `outboxPersistFailed`).
        case persistOutbox([OutboxEntry])
        /// These outbox entries are durable (a `send` may return).
        case outboxStored([String])
        /// Remove these entries from storage (no report needed).
        case removeFromOutbox([String])
        /// Store the cursor, then report `cursorPersisted(_:)` (or `cursorPersistFailed()`).
        case persistCursor(CursorRecord)
        /// Hand the event to the app, in order; report `eventProcessed()` when its handler returned.
        case deliver(IncomingEvent)
        /// A send finished: acknowledged by the server, or refused for good.
        case sendFinished(clientMessageId: String, Result<SentMessage, ParleyError>)
        /// An app request (`request(…)`, `markRead`, presence) finished.
        case requestFinished(token: UInt64, Result<JSONObject, ParleyError>)
        /// The connection state the app sees changed.
        case stateChanged(ParleyConnectionState)
        /// `welcome` said events were lost to retention: resynchronise from history.
        case gap
    }

    enum Phase: Sendable, Equatable {
        case idle
        case connecting
        case awaitingWelcome
        case connected
        case backingOff
        case stopped(ParleyError?)
    }

    enum Pending: Sendable, Equatable {
        case send(String)
        case app(UInt64)
        case `internal`
    }

    enum PipelineItem: Sendable, Equatable {
        /// A queued event handed to the app.
        case queued(seq: Int64, key: String?, epoch: Int)
        /// A duplicate (already processed) queued event: advances the cursor when reached.
        case skip(seq: Int64, epoch: Int)
        /// An unqueued event handed to the app.
        case live
    }

    public let configuration: ParleyClientConfiguration
    private(set) var phase = Phase.idle
    private var random: SplitMix64
    private var sessionToken: String?

    // The current connection.
    private(set) var connectionID = 0
    private var attempt = 0
    private var phaseSince: Int64 = 0
    private var reconnectAt: Int64?
    private var lastActivity: Int64 = 0
    private var pingSent = false
    private(set) var userId: String?
    private var nextRequestID: Int64 = 1
    private var pending: [Int64: Pending] = [:]
    /// Request deadlines in send order (so in deadline order); answered ones are skipped.
    private var pendingDeadlines = FIFO<RequestDeadline>()
    private var ackedOnConnection: Int64 = 0
    private var readingPaused = false

    // The outbox.
    private var slots = OutboxQueue()
    private var sendsInFlight = 0
    private var persistingOutbox: [OutboxEntry]?
    private var waitingOutbox: [OutboxEntry] = []

    // The cursor and dedupe.
    /// The highest seq whose cursor is stored.
    private(set) var storedSeq: Int64
    /// The highest seq the app processed (stored or not yet).
    private(set) var processedSeq: Int64
    /// The highest seq taken into the pipeline (processed or not yet).
    private var acceptedSeq: Int64
    private var persistingCursor: (seq: Int64, epoch: Int)?
    private var ackDueAt: Int64?
    private var recent: RecentKeys
    private var inPipeline: [String: Int] = [:]
    private var pipeline = FIFO<PipelineItem>()
    /// Bumped by a `reset`: events of an older epoch no longer move the cursor.
    private var epoch = 0

    // Requests that outlive connections.
    private(set) var subscriptions: [String] = []
    private var heldReads: [(ids: [String], token: UInt64?)] = []

    /// A machine for a device whose storage held `stored`.
    public init(configuration: ParleyClientConfiguration, stored: ParleyStoredState, random: SplitMix64 = SplitMix64()) {
        self.configuration = configuration
        self.random = random
        storedSeq = stored.cursor.seq
        processedSeq = stored.cursor.seq
        acceptedSeq = stored.cursor.seq
        recent = RecentKeys(capacity: configuration.dedupeWindow, keys: stored.cursor.recentKeys)
        slots = OutboxQueue(stored.outbox)
    }

    /// The connection state the app sees.
    public var connectionState: ParleyConnectionState {
        switch phase {
        case .idle: .idle
        case .connecting, .awaitingWelcome: .connecting
        case .connected: .connected(userId: userId ?? "")
        case .backingOff: .waitingToReconnect(afterMilliseconds: max(0, (reconnectAt ?? phaseSince) - phaseSince))
        case .stopped(let error): .stopped(error)
        }
    }

    /// Messages in the outbox, sent or not yet (oldest first).
    public var outbox: [OutboxEntry] { slots.entries + (persistingOutbox ?? []) + waitingOutbox }

    /// How many messages are in the outbox.
    public var outboxCount: Int { slots.count + (persistingOutbox?.count ?? 0) + waitingOutbox.count }

    /// Events handed to the app and not yet processed.
    public private(set) var pendingEvents = 0

    // MARK: App inputs

    /// Connects with `sessionToken` (again after `invalidSession`, with a new one).
    public mutating func start(sessionToken: String, now: Int64) -> [Action] {
        var actions: [Action] = []
        self.sessionToken = sessionToken
        switch phase {
        case .connecting, .awaitingWelcome, .connected:
            actions.append(.closeConnection(code: 1000, reason: "new session"))
            connectionLost(now: now, actions: &actions)
        default:
            break
        }
        attempt = 0
        open(now: now, actions: &actions)
        return actions
    }

    /// Stops the client: closes the socket and does not reconnect.
    public mutating func stop(now: Int64) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .connecting, .awaitingWelcome, .connected:
            actions.append(.closeConnection(code: 1000, reason: "client stopped"))
        default:
            break
        }
        endConnection(failingWith: .stopped, actions: &actions)
        phase = .stopped(nil)
        reconnectAt = nil
        actions.append(.stateChanged(.stopped(nil)))
        persistCursorIfBehind(now: now, actions: &actions)
        return actions
    }

    /// Queues a message: it is stored, then sent (and re-sent) until the server acknowledges it.
    public mutating func enqueue(_ message: OutgoingMessage, clientMessageId: String, now: Int64) throws(ParleyError) -> [Action] {
        guard !message.to.isEmpty, message.to.count <= 100 else { throw .invalidArgument("to: 1-100 recipients") }
        guard message.text.utf8.count <= 65_536 else { throw .invalidArgument("text: at most 64 KiB") }
        guard !clientMessageId.isEmpty, clientMessageId.utf8.count <= 128 else { throw .invalidArgument("clientMessageId") }
        guard outboxCount < configuration.maxOutboxEntries else { throw .outboxFull }
        waitingOutbox.append(OutboxEntry(clientMessageId: clientMessageId, message: message))
        var actions: [Action] = []
        persistWaitingOutbox(actions: &actions)
        return actions
    }

    /// Sends a request of `type` (e.g. `call.invite`) with `fields`; its answer comes back as
    /// `requestFinished(token)`. Fails at once when not connected.
    public mutating func request(type: String, fields: JSONObject, token: UInt64, now: Int64) -> [Action] {
        guard phase == .connected else { return [.requestFinished(token: token, .failure(.notConnected))] }
        var actions: [Action] = []
        sendRequest(type: type, fields: fields, as: .app(token), now: now, actions: &actions)
        return actions
    }

    /// Marks messages read (`read` receipts to their senders); held while offline and sent
    /// after the next `welcome`.
    public mutating func markRead(_ messageIds: [String], token: UInt64?, now: Int64) -> [Action] {
        var actions: [Action] = []
        for start in stride(from: 0, to: messageIds.count, by: 500) {
            let chunk = Array(messageIds[start..<min(messageIds.count, start + 500)])
            let last = start + 500 >= messageIds.count
            if phase == .connected {
                sendRead(chunk, token: last ? token : nil, now: now, actions: &actions)
            } else if heldReads.count < 100 {
                heldReads.append((chunk, last ? token : nil))
            } else if last, let token {
                actions.append(.requestFinished(token: token, .failure(.notConnected)))
            }
        }
        return actions
    }

    /// Tells `to` that this user is (or stopped) typing; dropped while offline (best effort).
    public mutating func typing(to: String, active: Bool) -> [Action] {
        guard phase == .connected else { return [] }
        return [.sendText(JSONValue.object(["type": "typing", "to": .string(to), "active": .bool(active)]).serialized())]
    }

    /// Watches the presence of `users`; kept across reconnects.
    public mutating func subscribePresence(_ users: [String], token: UInt64?, now: Int64) -> [Action] {
        let new = users.filter { !subscriptions.contains($0) }
        subscriptions.append(contentsOf: new)
        return presenceRequest("presence.subscribe", users: users, token: token, now: now)
    }

    /// Stops watching the presence of `users`.
    public mutating func unsubscribePresence(_ users: [String], token: UInt64?, now: Int64) -> [Action] {
        subscriptions.removeAll { users.contains($0) }
        return presenceRequest("presence.unsubscribe", users: users, token: token, now: now)
    }

    /// The app's handler returned for the oldest delivered event.
    public mutating func eventProcessed(now: Int64) -> [Action] {
        guard let item = pipeline.popFirst() else { return [] }
        var actions: [Action] = []
        pendingEvents -= 1
        if case .queued(let seq, let key, let itemEpoch) = item {
            if let key {
                if let count = inPipeline[key], count > 1 { inPipeline[key] = count - 1 } else { inPipeline[key] = nil }
                recent.insert(key)
            }
            if itemEpoch == epoch { processedSeq = max(processedSeq, seq) }
        }
        while case .skip(let seq, let itemEpoch)? = pipeline.first {
            pipeline.popFirst()
            if itemEpoch == epoch { processedSeq = max(processedSeq, seq) }
        }
        if readingPaused && pendingEvents <= configuration.maxPendingEvents / 2 {
            readingPaused = false
            actions.append(.resumeReading)
        }
        cursorAdvanced(now: now, actions: &actions)
        return actions
    }

    // MARK: Storage inputs

    /// The last `persistOutbox` batch is durable.
    public mutating func outboxPersisted(now: Int64) -> [Action] {
        guard let batch = persistingOutbox else { return [] }
        persistingOutbox = nil
        for entry in batch { slots.append(entry) }
        var actions: [Action] = [.outboxStored(batch.map(\.clientMessageId))]
        persistWaitingOutbox(actions: &actions)
        flushOutbox(now: now, actions: &actions)
        return actions
    }

    /// The last `persistOutbox` batch could not be stored: its sends fail.
    public mutating func outboxPersistFailed(_ error: ParleyError, now: Int64) -> [Action] {
        guard let batch = persistingOutbox else { return [] }
        persistingOutbox = nil
        var actions = batch.map { Action.sendFinished(clientMessageId: $0.clientMessageId, .failure(error)) }
        persistWaitingOutbox(actions: &actions)
        return actions
    }

    /// The cursor up to `seq` is durable: acknowledge it.
    public mutating func cursorPersisted(_ seq: Int64, now: Int64) -> [Action] {
        guard let persisting = persistingCursor, persisting.seq == seq else { return [] }
        persistingCursor = nil
        var actions: [Action] = []
        if persisting.epoch == epoch {
            storedSeq = max(storedSeq, seq)
            if phase == .connected && storedSeq > ackedOnConnection {
                ackedOnConnection = storedSeq
                actions.append(.sendText(ClientFrames.ack(upTo: storedSeq)))
            }
        }
        cursorAdvanced(now: now, actions: &actions)
        return actions
    }

    /// The cursor could not be stored; it is tried again after `sendRetryMilliseconds`.
    public mutating func cursorPersistFailed(now: Int64) -> [Action] {
        persistingCursor = nil
        ackDueAt = now + configuration.sendRetryMilliseconds
        return []
    }

    // MARK: Socket inputs

    /// The socket `id` is open: say hello.
    public mutating func socketOpened(id: Int, now: Int64) -> [Action] {
        guard id == connectionID, phase == .connecting, let sessionToken else { return [] }
        phase = .awaitingWelcome
        phaseSince = now
        lastActivity = now
        return [.sendText(ClientFrames.hello(sessionToken: sessionToken, deviceId: configuration.deviceId, resumeAfter: processedSeq))]
    }

    /// A pong (or any sign of life below the frame level) arrived on socket `id`.
    public mutating func socketActivity(id: Int, now: Int64) {
        guard id == connectionID else { return }
        lastActivity = now
        pingSent = false
    }

    /// The socket `id` closed with `code` (1006 when it dropped without a close frame).
    public mutating func socketClosed(id: Int, code: Int, reason: String, now: Int64) -> [Action] {
        guard id == connectionID else { return [] }
        switch phase {
        case .connecting, .awaitingWelcome, .connected:
            break
        default:
            return []
        }
        var actions: [Action] = []
        if let error = ParleyError.forCloseCode(code, reason: reason) {
            endConnection(failingWith: .notConnected, actions: &actions)
            phase = .stopped(error)
            reconnectAt = nil
            actions.append(.stateChanged(.stopped(error)))
            persistCursorIfBehind(now: now, actions: &actions)
        } else {
            connectionLost(now: now, actions: &actions)
        }
        return actions
    }

    /// A text frame arrived on socket `id`.
    public mutating func received(_ text: String, id: Int, now: Int64) -> [Action] {
        guard id == connectionID else { return [] }
        lastActivity = now
        pingSent = false
        guard let event = ServerEvent.parse(text) else { return [] }
        return received(event, now: now)
    }

    /// A parsed frame arrived on the current socket.
    public mutating func received(_ event: ServerEvent, now: Int64) -> [Action] {
        var actions: [Action] = []
        switch (phase, event) {
        case (.awaitingWelcome, .welcome(let user, _, _, let gap, let reset)):
            welcome(userId: user, gap: gap, reset: reset, now: now, actions: &actions)
        case (.connected, .ok(let re?, let fields)):
            answered(re, .success(fields), now: now, actions: &actions)
        case (.connected, .error(let re?, let code, let message, _)):
            answered(re, .failure(RequestFailure(code: code, message: message)), now: now, actions: &actions)
        case (.connected, .queued(let seq, let incoming)):
            accept(seq: seq, incoming, now: now, actions: &actions)
        case (.connected, .live(let incoming)):
            appendToPipeline(.live, actions: &actions)
            actions.append(.deliver(incoming))
        default:
            // Frames that do not belong to the phase (an event before `welcome`, a second
            // `welcome`, an error without a readable id) change nothing: the server closes the
            // connection when it matters.
            break
        }
        return actions
    }

    // MARK: Time

    /// Runs whatever is due at `now`.
    public mutating func tick(now: Int64) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .backingOff:
            if let at = reconnectAt, now >= at { open(now: now, actions: &actions) }
        case .connecting, .awaitingWelcome:
            if now - phaseSince >= configuration.connectTimeoutMilliseconds { drop("connect timed out", now: now, actions: &actions) }
        case .connected:
            if now - lastActivity >= configuration.deadAfterMilliseconds {
                drop("no frame or pong for \(configuration.deadAfterMilliseconds) ms", now: now, actions: &actions)
            } else if let deadline = earliestRequestDeadline(), now >= deadline {
                drop("request timed out", now: now, actions: &actions)
            } else {
                if !pingSent && now - lastActivity >= configuration.pingAfterMilliseconds {
                    pingSent = true
                    actions.append(.sendPing)
                }
                flushOutbox(now: now, actions: &actions)
            }
        case .idle, .stopped:
            break
        }
        if let due = ackDueAt, now >= due {
            ackDueAt = nil
            persistCursorNow(actions: &actions)
        }
        return actions
    }

    /// When `tick` next has something to do (nil: nothing is scheduled).
    public var nextDeadline: Int64? {
        var deadline: Int64?
        func consider(_ value: Int64?) {
            guard let value else { return }
            deadline = min(deadline ?? value, value)
        }
        consider(ackDueAt)
        switch phase {
        case .backingOff:
            consider(reconnectAt)
        case .connecting, .awaitingWelcome:
            consider(phaseSince + configuration.connectTimeoutMilliseconds)
        case .connected:
            consider(lastActivity + (pingSent ? configuration.deadAfterMilliseconds : configuration.pingAfterMilliseconds))
            consider(earliestRequestDeadline())
            consider(slots.earliestRetry)
        case .idle, .stopped:
            break
        }
        return deadline
    }

    // MARK: Connection

    private mutating func open(now: Int64, actions: inout [Action]) {
        connectionID += 1
        phase = .connecting
        phaseSince = now
        reconnectAt = nil
        readingPaused = false
        actions.append(.openConnection(id: connectionID))
        actions.append(.stateChanged(.connecting))
    }

    private mutating func welcome(userId: String, gap: Bool, reset: Bool, now: Int64, actions: inout [Action]) {
        phase = .connected
        self.userId = userId
        attempt = 0
        lastActivity = now
        pingSent = false
        ackedOnConnection = 0
        actions.append(.stateChanged(.connected(userId: userId)))
        if reset {
            // Our seq belongs to another life of the device: start over, keep the dedupe keys
            // (the replay may bring events the app already has).
            epoch += 1
            storedSeq = 0
            processedSeq = 0
            acceptedSeq = 0
            persistingCursor = nil
            persistCursorNow(actions: &actions)
        } else if storedSeq > 0 {
            ackedOnConnection = storedSeq
            actions.append(.sendText(ClientFrames.ack(upTo: storedSeq)))
        }
        if gap { actions.append(.gap) }
        for start in stride(from: 0, to: subscriptions.count, by: 500) {
            let users = Array(subscriptions[start..<min(subscriptions.count, start + 500)])
            sendRequest(type: "presence.subscribe", fields: ["users": .array(users.map { .string($0) })], as: .internal,
                        now: now, actions: &actions)
        }
        let reads = heldReads
        heldReads = []
        for read in reads { sendRead(read.ids, token: read.token, now: now, actions: &actions) }
        if pendingEvents >= configuration.maxPendingEvents {
            readingPaused = true
            actions.append(.pauseReading)
        }
        flushOutbox(now: now, actions: &actions)
    }

    /// Closes the current connection ourselves (timeout, dead peer) and backs off.
    private mutating func drop(_ reason: String, now: Int64, actions: inout [Action]) {
        actions.append(.closeConnection(code: 1000, reason: reason))
        connectionLost(now: now, actions: &actions)
    }

    private mutating func connectionLost(now: Int64, actions: inout [Action]) {
        endConnection(failingWith: .notConnected, actions: &actions)
        let delay = configuration.backoff.delay(attempt: attempt, random: &random)
        attempt += 1
        phase = .backingOff
        phaseSince = now
        reconnectAt = now + delay
        actions.append(.stateChanged(.waitingToReconnect(afterMilliseconds: delay)))
    }

    /// Forgets the connection's requests: app requests fail, sends go back to the outbox.
    private mutating func endConnection(failingWith error: ParleyError, actions: inout [Action]) {
        for id in pending.keys.sorted() {
            if case .app(let token) = pending[id] { actions.append(.requestFinished(token: token, .failure(error))) }
        }
        pending = [:]
        pendingDeadlines.removeAll()
        sendsInFlight = 0
        slots.resetToReady()
    }

    // MARK: Requests

    private mutating func sendRequest(type: String, fields: JSONObject, as kind: Pending, now: Int64, actions: inout [Action]) {
        let id = register(kind, now: now)
        actions.append(.sendText(ClientFrames.request(id: id, type: type, fields: fields)))
    }

    private mutating func sendRead(_ ids: [String], token: UInt64?, now: Int64, actions: inout [Action]) {
        sendRequest(type: "message.read", fields: ["messageIds": .array(ids.map { .string($0) })],
                    as: token.map(Pending.app) ?? .internal, now: now, actions: &actions)
    }

    private mutating func presenceRequest(_ type: String, users: [String], token: UInt64?, now: Int64) -> [Action] {
        guard phase == .connected else {
            // Subscriptions are (re)sent after the next `welcome`; the app's request is done.
            return token.map { [.requestFinished(token: $0, .success([:]))] } ?? []
        }
        var actions: [Action] = []
        sendRequest(type: type, fields: ["users": .array(users.map { .string($0) })], as: token.map(Pending.app) ?? .internal,
                    now: now, actions: &actions)
        return actions
    }

    /// The deadline of the oldest unanswered request (answered ones at the front are dropped
    /// as they are answered).
    private func earliestRequestDeadline() -> Int64? {
        pendingDeadlines.first?.deadline
    }

    struct RequestDeadline: Sendable {
        var id: Int64
        var deadline: Int64
    }

    /// Registers request `id` as `kind`, due for an answer within the request timeout.
    private mutating func register(_ kind: Pending, now: Int64) -> Int64 {
        let id = nextRequestID
        nextRequestID += 1
        pending[id] = kind
        pendingDeadlines.append(RequestDeadline(id: id, deadline: now + configuration.requestTimeoutMilliseconds))
        return id
    }

    struct RequestFailure: Error {
        var code: String
        var message: String
    }

    private mutating func answered(_ re: Int64, _ result: Result<JSONObject, RequestFailure>,
                                   now: Int64, actions: inout [Action]) {
        guard let kind = pending.removeValue(forKey: re) else { return }
        while let oldest = pendingDeadlines.first, pending[oldest.id] == nil { pendingDeadlines.popFirst() }
        switch kind {
        case .internal:
            break
        case .app(let token):
            switch result {
            case .success(let fields): actions.append(.requestFinished(token: token, .success(fields)))
            case .failure(let error): actions.append(.requestFinished(token: token, .failure(.server(code: error.code, message: error.message))))
            }
        case .send(let clientMessageId):
            sendsInFlight -= 1
            switch result {
            case .success(let fields):
                guard slots.remove(clientMessageId) != nil else { break }
                let sent = SentMessage(clientMessageId: clientMessageId, messageId: fields["messageId"]?.string ?? "",
                                       sentAt: fields["sentAt"]?.string ?? "", failed: FailedRecipient.list(fields["failed"]),
                                       duplicate: fields["duplicate"]?.bool ?? false)
                actions.append(.removeFromOutbox([clientMessageId]))
                actions.append(.sendFinished(clientMessageId: clientMessageId, .success(sent)))
            case .failure(let error) where Self.isRetryable(error.code):
                slots.retry(clientMessageId, at: now + configuration.sendRetryMilliseconds)
            case .failure(let error):
                guard slots.remove(clientMessageId) != nil else { break }
                actions.append(.removeFromOutbox([clientMessageId]))
                actions.append(.sendFinished(clientMessageId: clientMessageId, .failure(.server(code: error.code, message: error.message))))
            }
            flushOutbox(now: now, actions: &actions)
        }
    }

    /// Errors after which the same send may succeed later.
    static func isRetryable(_ code: String) -> Bool {
        code == "rate_limited" || code == "unavailable" || code == "too_many_pending" || code == "internal"
    }

    // MARK: Outbox

    private mutating func persistWaitingOutbox(actions: inout [Action]) {
        guard persistingOutbox == nil, !waitingOutbox.isEmpty else { return }
        persistingOutbox = waitingOutbox
        waitingOutbox = []
        actions.append(.persistOutbox(persistingOutbox!))
    }

    /// Sends ready entries, oldest first, up to the in-flight bound.
    private mutating func flushOutbox(now: Int64, actions: inout [Action]) {
        guard phase == .connected, sendsInFlight < configuration.maxSendsInFlight else { return }
        for entry in slots.takeDue(now: now, limit: configuration.maxSendsInFlight - sendsInFlight) {
            let id = register(.send(entry.clientMessageId), now: now)
            sendsInFlight += 1
            actions.append(.sendText(ClientFrames.send(id: id, entry)))
        }
    }

    // MARK: Events and the cursor

    private mutating func accept(seq: Int64, _ incoming: IncomingEvent, now: Int64, actions: inout [Action]) {
        guard seq > acceptedSeq else { return }
        acceptedSeq = seq
        let key = incoming.dedupeKey
        if let key, recent.contains(key) || inPipeline[key] != nil {
            if pendingEvents == 0 {
                processedSeq = max(processedSeq, seq)
                cursorAdvanced(now: now, actions: &actions)
            } else {
                pipeline.append(.skip(seq: seq, epoch: epoch))
            }
            return
        }
        if let key { inPipeline[key, default: 0] += 1 }
        appendToPipeline(.queued(seq: seq, key: key, epoch: epoch), actions: &actions)
        actions.append(.deliver(incoming))
    }

    private mutating func appendToPipeline(_ item: PipelineItem, actions: inout [Action]) {
        pipeline.append(item)
        pendingEvents += 1
        if !readingPaused && pendingEvents >= configuration.maxPendingEvents {
            readingPaused = true
            actions.append(.pauseReading)
        }
    }

    /// Stores the cursor now when a batch is full, else within `ackDelay`.
    private mutating func cursorAdvanced(now: Int64, actions: inout [Action]) {
        let base = persistingCursor?.seq ?? storedSeq
        guard processedSeq > base else { return }
        if processedSeq - base >= Int64(configuration.ackBatchSize) {
            persistCursorNow(actions: &actions)
        } else if ackDueAt == nil {
            ackDueAt = now + configuration.ackDelayMilliseconds
        }
    }

    private mutating func persistCursorIfBehind(now: Int64, actions: inout [Action]) {
        if processedSeq > storedSeq { persistCursorNow(actions: &actions) }
    }

    private mutating func persistCursorNow(actions: inout [Action]) {
        guard persistingCursor == nil else { return }
        ackDueAt = nil
        persistingCursor = (processedSeq, epoch)
        actions.append(.persistCursor(CursorRecord(seq: processedSeq, recentKeys: recent.keys)))
    }
}
