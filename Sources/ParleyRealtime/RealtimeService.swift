#if canImport(Glibc)
import Glibc
#endif
import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import ParleyWebSocket
import Synchronization

/// The realtime service of one node: the `/v1/socket` endpoint, messaging over REST, group
/// commit, delivery to connections, presence, typing, multi-node routing and retention.
public final class RealtimeService: Sendable {
    public let configuration: RealtimeConfiguration
    public let database: PostgresClient
    public let group: EventLoopGroup
    public let registry: ConnectionRegistry
    public let queue: DeliveryQueue
    public let messages: MessageStore
    /// Who reached whom (presence and typing between contacts).
    public let contacts: ContactDirectory
    /// Who blocked whom (`/v1/blocks`).
    public let blocks: BlockList
    public let authenticator: any RealtimeAuthenticator
    /// This node's id, random per process.
    public let nodeID: String
    let logger: Logger
    let frameLimits: ClientFrameLimits
    let metrics: RealtimeMetrics
    private let loopContexts: [LoopContext]
    private let handlers = Mutex<[String: any RealtimeFrameHandler]>([:])
    private let messageHooks = Mutex<(any MessageHooks)?>(nil)
    private let connectionIDs = Atomic<UInt64>(0)
    private let cluster: RealtimeCluster
    /// Nodes with a recent heartbeat (1 until the first heartbeat says otherwise).
    private let liveNodes = Atomic<Int>(1)
    /// Whether this node told the others it started (`ClusterMessage.joined`, after its first heartbeat).
    private let announced = Atomic<Bool>(false)
    /// Users online on other nodes: user → nodes.
    private let remoteOnline = Mutex<[String: Set<String>]>([:])
    private let running = Atomic<Bool>(false)
    /// The database's device label key (`loadSettings`).
    private let labelKey = Mutex<[UInt8]>([])
    /// Connection count at the last `malloc_trim`.
    private let trimmedAtCount = Atomic<Int>(0)

    /// Per-loop group-commit batchers.
    private final class LoopContext: Sendable {
        let sends: TickBatcher<MessageStore.Send>
        let acks: TickBatcher<Acknowledgement>

        init(sends: TickBatcher<MessageStore.Send>, acks: TickBatcher<Acknowledgement>) {
            self.sends = sends
            self.acks = acks
        }
    }

    struct Acknowledgement {
        var key: DeviceKey
        var upTo: Int64
        var completion: (Result<Void, RealtimeFailure>) -> Void
    }

    public init(
        database: PostgresClient, group: EventLoopGroup, configuration: RealtimeConfiguration = RealtimeConfiguration(),
        authenticator: any RealtimeAuthenticator, observer: (any DeliveryObserver)? = nil,
        metrics metricsRegistry: MetricsRegistry? = nil, logger: Logger = Logger(label: "realtime")
    ) {
        self.configuration = configuration
        self.database = database
        self.group = group
        self.logger = logger
        self.authenticator = authenticator
        var generator = SystemRandomNumberGenerator()
        let random: UInt64 = generator.next()
        let id = String(random & 0xFFFF_FFFF_FFFF, radix: 16)
        nodeID = String(repeating: "0", count: 12 - id.count) + id
        registry = ConnectionRegistry()
        let queue = DeliveryQueue(database: database, registry: registry, nodeID: nodeID, observer: observer, logger: logger)
        self.queue = queue
        let contacts = ContactDirectory(database: database)
        self.contacts = contacts
        blocks = BlockList(database: database)
        let messages = MessageStore(queue: queue, contacts: contacts)
        self.messages = messages
        frameLimits = ClientFrameLimits(configuration)
        metrics = RealtimeMetrics(connections: registry, metrics: metricsRegistry)
        let metrics = self.metrics
        loopContexts = group.loops.map { loop in
            LoopContext(
                sends: TickBatcher(loop: loop, maxBatch: configuration.maxBatchSize, maxInFlight: configuration.maxBatchesInFlightPerLoop) { batch in
                    metrics.recordBatch(size: batch.count)
                    await messages.commit(batch)
                },
                acks: TickBatcher(loop: loop, maxBatch: 4 * configuration.maxBatchSize, maxInFlight: 2, delay: configuration.ackDelay) { batch in
                    await Self.commitAcknowledgements(batch, queue: queue)
                })
        }
        cluster = RealtimeCluster(loop: group.loops[0], nodeID: nodeID, configuration: PostgresConfiguration(connectionString: database.configuration.connectionString), logger: logger)
        cluster.service = self
    }

    // MARK: Lifecycle

    /// Starts listening for other nodes, the heartbeat and the retention job.
    public func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        cluster.start()
        blocks.startListening(on: group.loops[0], logger: logger)
        let loop = group.loops[0]
        loop.execute { [self] in
            repeatEvery(configuration.heartbeatInterval, on: loop, first: .zero) { [self] in
                do throws(RealtimeFailure) {
                    liveNodes.store(try await queue.heartbeat(staleAfter: configuration.nodeStaleAfter,
                                                                      maxDevices: configuration.maxDevicesPerUser), ordering: .relaxed)
                    // Once this node's row is in rt_nodes, so a running node's next heartbeat counts it too.
                    if !announced.exchange(true, ordering: .relaxed) { cluster.broadcast(.joined(node: nodeID)) }
                } catch {
                    logger.warning("realtime heartbeat failed", [("error", error.description)])
                }
                returnFreedMemory()
            }
            repeatEvery(configuration.retentionInterval, on: loop, first: .seconds(60)) { [self] in
                do throws(RealtimeFailure) {
                    let removed = try await queue.trim(retention: configuration.retention)
                    if removed > 0 { logger.info("retention removed queued events and devices", [("rows", "\(removed)")]) }
                } catch {
                    logger.warning("retention failed", [("error", error.description)])
                }
            }
        }
    }

    /// Reads what the service needs from the database before it serves: the device label key
    /// (`rt_settings`, random per database, so labels agree on every node).
    public func loadSettings() async throws(RealtimeFailure) {
        let rows = try await queue.run("SELECT device_label_key FROM rt_settings", [])
        guard let key = rows.first?["device_label_key"].string, !key.isEmpty else {
            throw RealtimeFailure(.internal, "rt_settings has no device label key")
        }
        labelKey.withLock { $0 = Array(key.utf8) }
    }

    /// The opaque label other users see for a device (`DeviceLabel`).
    public func deviceLabel(of device: DeviceKey) -> String {
        DeviceLabel.make(key: labelKey.withLock { $0 }, device: device)
    }

    /// Stops the background jobs and the listener (connections are closed by the HTTP server).
    public func shutdown() {
        running.store(false, ordering: .releasing)
        cluster.stop()
        blocks.stopListening()
    }

    /// After many connections opened or closed, hands the heap pages freed since to the kernel:
    /// a burst of handshakes leaves glibc's arenas fragmented, which otherwise doubles the
    /// resident memory of the idle connections that remain. Runs off the event loops.
    private func returnFreedMemory() {
        let count = registry.count
        let previous = trimmedAtCount.load(ordering: .relaxed)
        guard abs(count - previous) >= 256 else { return }
        trimmedAtCount.store(count, ordering: .relaxed)
        guard let trim = Self.mallocTrim else { return }
        Task.detached(priority: .background) {
            _ = trim(0)
        }
    }

    /// glibc's `malloc_trim`, looked up at run time (not exported by the Glibc module).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    private func repeatEvery(_ interval: Duration, on loop: EventLoop, first: Duration, _ body: @escaping @Sendable () async -> Void) {
        loop.schedule(after: first) { [self] in
            guard running.load(ordering: .relaxed) else { return }
            Task(executorPreference: loop) { [self] in
                await body()
                repeatEvery(interval, on: loop, first: interval, body)
            }
        }
    }

    // MARK: Routes

    /// Mounts `GET /v1/socket` (WebSocket), `POST|GET /v1/messages` and `/v1/blocks`.
    public func register(on router: Router) {
        let handshake = WebSocketHandshake()
        var socketConfiguration = WebSocketHandler.Configuration()
        socketConfiguration.limits = .init(maxFrameSize: configuration.maxFrameBytes, maxMessageSize: configuration.maxFrameBytes)
        socketConfiguration.pingInterval = configuration.pingInterval
        socketConfiguration.pongTimeout = configuration.pongTimeout
        socketConfiguration.maxPendingOutboundBytes = configuration.maxOutboundBytes
        let webSocket = socketConfiguration
        router.upgrade("/v1/socket") { [self] request, _, connection in
            do throws(WebSocketHandshakeError) {
                let accepted = try handshake.validate(method: request.method.rawValue) { request.headers[$0] }
                let session = RealtimeConnection(service: self, loop: connection.loop,
                                                 connectionID: connectionIDs.add(1, ordering: .relaxed).newValue)
                let handler = WebSocketHandler.install(on: connection, configuration: webSocket, delegate: session)
                return .accept(HTTPResponse(status: .switchingProtocols, headers: HTTPHeaders(accepted.headers)), handler)
            } catch {
                var response = HTTPResponse.plain(HTTPStatus(error.status), error.description)
                for (name, value) in error.responseHeaders { response.headers.add(name, value) }
                return .reject(response)
            }
        }
        MessagesEndpoint(service: self).register(on: router)
        BlocksEndpoint(service: self).register(on: router)
    }

    /// Routes frames whose type starts with `prefix` (e.g. `call.`) to `handler`.
    public func register(handler: any RealtimeFrameHandler, forTypePrefix prefix: String) {
        handlers.withLock { $0[prefix] = handler }
    }

    func frameHandler(for type: String) -> (any RealtimeFrameHandler)? {
        handlers.withLock { handlers in
            handlers.first { type.hasPrefix($0.key) }?.value
        }
    }

    func connectionOpened(_ connection: RealtimeConnection, device: DeviceKey) {
        let all = handlers.withLock { Array($0.values) }
        for handler in all { handler.connectionOpened(connection, device: device) }
    }

    func connectionClosed(_ connection: RealtimeConnection, device: DeviceKey) {
        let all = handlers.withLock { Array($0.values) }
        for handler in all { handler.connectionClosed(connection, device: device) }
    }

    // MARK: Messaging

    /// Installs the Cloud Code hooks every message passes (`beforeMessage`, `afterMessage`).
    public func install(messageHooks hooks: any MessageHooks) {
        messageHooks.withLock { $0 = hooks }
    }

    /// Stores a message through this loop's group commit (call on `loop`); `completion` runs on
    /// the loop after the commit. Recipients who blocked the sender are left out without a word
    /// (a message to no one else is answered as sent and stored nowhere); the message hooks
    /// review it first when registered. With no hooks and the sender's blockers cached, nothing
    /// is read before the commit.
    public func send(_ request: SendMessageRequest, from sender: String, device: String?, on loop: EventLoop,
                     completion: @escaping (Result<SendResult, RealtimeFailure>) -> Void) {
        loop.preconditionInEventLoop()
        let hooks = messageHooks.withLock { $0 }
        if hooks.map({ $0.registeredFromMemory() == MessageHookSet.none }) ?? true, let blockers = blocks.cachedBlockers(of: sender) {
            guard let request = Self.request(request, without: blockers) else { return completion(.success(Self.droppedResult())) }
            return submit(request, from: sender, device: device, on: loop, completion: completion)
        }
        let completion = LoopBound(completion, loop: loop)
        Task(executorPreference: loop) { [self] in
            let result = await reviewAndSubmit(request, from: sender, device: device, on: loop, hooks: hooks)
            loop.execute { completion.value(result) }
        }
    }

    /// The send without the recipients in `blockers`; nil when none is left.
    static func request(_ request: SendMessageRequest, without blockers: Set<String>) -> SendMessageRequest? {
        guard !blockers.isEmpty else { return request }
        var request = request
        request.to.removeAll { blockers.contains($0) }
        return request.to.isEmpty ? nil : request
    }

    /// What a sender sees when every recipient blocked it: sent, as any message.
    static func droppedResult() -> SendResult {
        let now = UTCTime.nowMilliseconds()
        return SendResult(messageId: MessageID.make(milliseconds: now), sentAt: now, recipients: [], failed: [], duplicate: false)
    }

    /// The block list, then `beforeMessage`, the commit and `afterMessage`.
    private func reviewAndSubmit(_ request: SendMessageRequest, from sender: String, device: String?, on loop: EventLoop,
                                 hooks: (any MessageHooks)?) async -> Result<SendResult, RealtimeFailure> {
        let blockers: Set<String>
        do {
            blockers = try await blocks.blockers(of: sender)
        } catch {
            return .failure(error)
        }
        guard var request = Self.request(request, without: blockers) else { return .success(Self.droppedResult()) }
        let registered = await hooks?.registered() ?? .none
        if let hooks, registered.before {
            switch await hooks.beforeMessage(OutgoingMessage(from: sender, deviceId: device, request: request)) {
            case .accept:
                break
            case .rewrite(let text, let headers):
                var object: JSONObject = ["clientMessageId": .string(request.clientMessageId), "to": .array(request.to.map { .string($0) }),
                                          "text": .string(text)]
                if let headers { object["headers"] = .object(headers) } else if case .object(let old)? = try? JSONParser().parse(request.headersJSON) {
                    object["headers"] = .object(old)
                }
                do throws(ClientFrameError) {
                    request = try SendMessageRequest.parse(object, limits: frameLimits, id: nil)
                } catch {
                    return .failure(RealtimeFailure(.hookFailed, "the beforeMessage hook's rewrite is refused: \(error.message)"))
                }
            case .refuse(let failure):
                return .failure(failure)
            }
        }
        let committed = request
        let result = await withCheckedContinuation { continuation in
            loop.execute { [self] in
                submit(committed, from: sender, device: device, on: loop) { continuation.resume(returning: $0) }
            }
        }
        if let hooks, registered.after, case .success(let sent) = result, !sent.duplicate, !sent.recipients.isEmpty {
            await hooks.afterMessage(MessageRecord(id: sent.messageId, from: sender, to: sent.recipients, text: committed.text,
                                                   headersJSON: committed.headersJSON, sentAt: sent.sentAt))
        }
        return result
    }

    /// Hands a reviewed send to this loop's group commit (call on `loop`).
    private func submit(_ request: SendMessageRequest, from sender: String, device: String?, on loop: EventLoop,
                        completion: @escaping (Result<SendResult, RealtimeFailure>) -> Void) {
        let now = UTCTime.nowMilliseconds()
        loopContexts[loop.index].sends.submit(MessageStore.Send(
            request: request, sender: sender, senderDevice: device ?? "", messageID: MessageID.make(milliseconds: now),
            sentAt: now, completion: completion))
    }

    /// `send` for a task running on `loop`.
    public func send(_ request: SendMessageRequest, from sender: String, device: String?, on loop: EventLoop) async -> Result<SendResult, RealtimeFailure> {
        await withCheckedContinuation { continuation in
            loop.execute { [self] in
                send(request, from: sender, device: device, on: loop) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Acknowledges the device's events up to `upTo` through this loop's batcher (call on `loop`).
    func acknowledge(_ key: DeviceKey, upTo: Int64, on loop: EventLoop, completion: @escaping (Result<Void, RealtimeFailure>) -> Void) {
        loopContexts[loop.index].acks.submit(Acknowledgement(key: key, upTo: upTo, completion: completion))
    }

    private static func commitAcknowledgements(_ batch: [Acknowledgement], queue: DeliveryQueue) async {
        var highest: [DeviceKey: Int64] = [:]
        for ack in batch { highest[ack.key] = max(highest[ack.key] ?? 0, ack.upTo) }
        let result: Result<Void, RealtimeFailure>
        do {
            _ = try await queue.acknowledge(highest.map { (key: $0.key, upTo: $0.value) })
            result = .success(())
        } catch {
            result = .failure(error)
        }
        for ack in batch { ack.completion(result) }
    }

    func takeSendTokens(_ userId: String, count: Double) -> Bool {
        registry.takeSendTokens(userId, count: count, rate: configuration.sendRatePerSecond, burst: configuration.sendBurst)
    }

    // MARK: Presence and typing

    struct PresenceState {
        var userId: String
        var online: Bool
        var lastSeenAt: Int64?
    }

    /// Current presence of `users` for `viewer` (`onlineHere[i]`: connected to this node); a user
    /// `viewer` blocked shows as offline, never seen.
    func presenceSnapshot(_ users: [String], onlineHere: [Bool], viewer: String) async -> [PresenceState] {
        let blockers = (try? await blocks.blockers(of: users)) ?? [:]
        // Users the viewer blocked (or whose blockers cannot be read).
        let hidden = Set(users.filter { blockers[$0]?.contains(viewer) ?? true })
        let visible = zip(users, onlineHere).filter { !hidden.contains($0.0) }
        let states = await presenceStates(visible.map(\.0), onlineHere: visible.map(\.1))
        return states + hidden.sorted().map { PresenceState(userId: $0, online: false, lastSeenAt: nil) }
    }

    private func presenceStates(_ users: [String], onlineHere: [Bool]) async -> [PresenceState] {
        let now = UTCTime.nowMilliseconds()
        var states = zip(users, onlineHere).map { PresenceState(userId: $0, online: $1, lastSeenAt: $1 ? now : nil) }
        let others = states.filter { !$0.online }.map(\.userId)
        guard !others.isEmpty else { return states }
        var remote = remoteOnline.withLock { map in Set(others.filter { !(map[$0]?.isEmpty ?? true) }) }
        var seen: [String: Int64] = [:]
        // Devices connected to another node count as online (the row records where each device is).
        if let rows = try? await database.query("""
            SELECT user_id, max(last_seen_at) AS seen, bool_or(node_id IS NOT NULL AND node_id <> $2) AS elsewhere
              FROM rt_devices WHERE user_id = ANY ($1) GROUP BY user_id
            """, [.text(SQLArray.literal(others)), .text(nodeID)]) {
            for row in rows {
                guard let user = row["user_id"].string else { continue }
                if let at = row["seen"].timestampMilliseconds { seen[user] = at }
                if row["elsewhere"].bool == true { remote.insert(user) }
            }
        }
        for index in states.indices where !states[index].online {
            let user = states[index].userId
            states[index].online = remote.contains(user)
            states[index].lastSeenAt = remote.contains(user) ? now : seen[user]
        }
        return states
    }

    /// A user's first connection on this node opened, or its last one closed.
    func presenceChanged(userId: String, online: Bool, localSubscribers: [RealtimeConnection]) {
        let now = UTCTime.nowMilliseconds()
        let elsewhere = remoteOnline.withLock { !($0[userId]?.isEmpty ?? true) }
        if !elsewhere {
            sendPresence(ServerFrame.presence(userId: userId, online: online, lastSeenAt: now), of: userId, to: localSubscribers)
        }
        if liveNodes.load(ordering: .relaxed) > 1 {
            cluster.broadcast(.presence(userId: userId, online: online, at: now, node: nodeID))
        }
    }

    /// Another node reported a presence change.
    func remotePresenceChanged(userId: String, online: Bool, at: Int64, node: String) {
        guard node != nodeID else { return }
        let (before, after) = remoteOnline.withLock { map -> (Bool, Bool) in
            let before = !(map[userId]?.isEmpty ?? true)
            if online {
                map[userId, default: []].insert(node)
            } else {
                map[userId]?.remove(node)
                if map[userId]?.isEmpty ?? false { map[userId] = nil }
            }
            return (before, !(map[userId]?.isEmpty ?? true))
        }
        // An "offline" from the only node we knew of, or one we never heard come online (it connected
        // before this node joined), is a change too.
        guard before != after || (!online && !after), !registry.isOnline(userId) else { return }
        sendPresence(ServerFrame.presence(userId: userId, online: after, lastSeenAt: at), of: userId, to: registry.subscribers(of: userId))
    }

    /// Sends `user`'s presence to the subscribers who did not block the user (dropped when the
    /// block list cannot be read).
    private func sendPresence(_ frame: [UInt8], of user: String, to subscribers: [RealtimeConnection]) {
        guard !subscribers.isEmpty else { return }
        func deliver(_ blockers: Set<String>) {
            for subscriber in subscribers {
                if blockers.isEmpty { subscriber.send(frame: frame) } else { subscriber.send(frame: frame, unlessUserIn: blockers) }
            }
        }
        if let blockers = blocks.cachedBlockers(of: user) { return deliver(blockers) }
        Task { [blocks] in
            guard let blockers = try? await blocks.blockers(of: user) else { return }
            deliver(blockers)
        }
    }

    /// Relays a typing indicator to the user's connected devices, on every node, unless the user
    /// blocked the sender.
    func relayTyping(to userId: String, from sender: String, active: Bool) {
        if let blockers = blocks.cachedBlockers(of: sender) {
            guard !blockers.contains(userId) else { return }
            return deliverTyping(to: userId, from: sender, active: active)
        }
        Task { [self] in
            guard let blockers = try? await blocks.blockers(of: sender), !blockers.contains(userId) else { return }
            deliverTyping(to: userId, from: sender, active: active)
        }
    }

    private func deliverTyping(to userId: String, from sender: String, active: Bool) {
        let frame = ServerFrame.typing(from: sender, active: active)
        let local = registry.connections(ofUser: userId)
        for connection in local { connection.send(frame: frame) }
        // Other nodes, found from where the user's devices are recorded: always when the user has no
        // connection here, else only when other nodes are known to be alive.
        guard local.isEmpty || liveNodes.load(ordering: .relaxed) > 1 else { return }
        let payload = ClusterMessage.typing(to: userId, from: sender, active: active).line
        let database = database
        let nodeID = nodeID
        Task {
            _ = try? await database.query("""
                SELECT pg_notify('parley_rt_' || n.node_id, $2)
                  FROM (SELECT DISTINCT node_id FROM rt_devices WHERE user_id = $1 AND node_id IS NOT NULL AND node_id <> $3) n
                """, [.text(userId), .text(payload), .text(nodeID)])
        }
    }

    /// Handles messages from other nodes (called on the cluster's loop).
    func received(_ message: ClusterMessage) {
        switch message {
        case .event(let key, let seq):
            guard let connection = registry.connection(for: key) else { return }
            connection.loop.execute { connection.hint(seq: seq) }
        case .replace(let key, let id):
            guard let connection = registry.connection(for: key), connection.connectionID == id else { return }
            connection.loop.execute { connection.replacedByNewerConnection() }
        case .typing(let to, let from, let active):
            let frame = ServerFrame.typing(from: from, active: active)
            for connection in registry.connections(ofUser: to) { connection.send(frame: frame) }
        case .presence(let user, let online, let at, let node):
            remotePresenceChanged(userId: user, online: online, at: at, node: node)
        case .joined(let node):
            // Presence changes and typing must reach the new node from now on, not from this node's next heartbeat.
            guard node != nodeID, liveNodes.load(ordering: .relaxed) < 2 else { return }
            liveNodes.store(2, ordering: .relaxed)
        case .chunk:
            preconditionFailure("chunks are put together by the cluster")
        }
    }

    // MARK: Relays between nodes

    /// Sends `frame` to the device's live connection when the device is connected to another
    /// node (unqueued: nothing happens if it is offline or leaves meanwhile). Returns whether a
    /// node was told; false too when the frame is longer than a relay carries.
    @discardableResult
    public func relay(_ frame: JSONObject, toDeviceElsewhere key: DeviceKey) async throws(PostgresError) -> Bool {
        let body = "d \(key.userId) \(key.deviceId) " + JSONValue.object(frame).serialized()
        guard let payloads = RelayMessage.payloads(body, id: RelayMessage.newID()) else { return false }
        let rows = try await database.query("""
            SELECT pg_notify('parley_rt_' || d.node_id, c)
              FROM rt_devices d CROSS JOIN unnest($3::text[]) c
             WHERE d.user_id = $1 AND d.device_id = $2 AND d.node_id IS NOT NULL AND d.node_id <> $4
            """, [.text(key.userId), .text(key.deviceId), .textArray(payloads), .text(nodeID)])
        return !rows.isEmpty
    }

    /// Sends `text` to the frame handler registered for `prefix` on the node `node`
    /// (`RealtimeFrameHandler.received(fromNode:)`). False when it is longer than a relay carries.
    @discardableResult
    public func relay(_ text: String, toHandler prefix: String, onNode node: String) async throws(PostgresError) -> Bool {
        guard !prefix.contains(" "), let payloads = RelayMessage.payloads("h \(prefix) \(text)", id: RelayMessage.newID()) else { return false }
        try await database.query("SELECT pg_notify($1, c) FROM unnest($2::text[]) c", [.text("parley_rt_" + node), .textArray(payloads)])
        return true
    }

    /// A relayed message from another node, put back together (called on the cluster's loop).
    func receivedRelay(_ body: String) {
        if body.hasPrefix("d ") {
            let fields = body.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
            guard fields.count == 4,
                  let connection = registry.connection(for: DeviceKey(userId: String(fields[1]), deviceId: String(fields[2])))
            else { return }
            connection.send(frame: WebSocketFrameEncoder.text(String(fields[3])))
        } else if body.hasPrefix("h ") {
            let fields = body.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, let handler = frameHandler(for: String(fields[1])) else { return }
            handler.received(fromNode: String(fields[2]))
        }
    }

    /// Closes the user's connections on this node with 4006: every one, or only those opened with
    /// `sessionToken`. Call it when sessions are revoked or a user is banned (each node gets the
    /// accounts event and closes its own).
    public func closeConnections(ofUser userId: String, sessionToken: String? = nil) {
        for connection in registry.connections(ofUser: userId) {
            connection.loop.execute { connection.sessionEnded(token: sessionToken) }
        }
    }

    /// Notifications may have been lost: every connection reads its queue again.
    func resynchronizeAll() {
        for connection in registry.allConnections() {
            connection.loop.execute { connection.resynchronize() }
        }
    }
}
