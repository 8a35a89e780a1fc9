import ParleyJSON
import ParleyLog
import ParleyMetrics
import ParleyNet
import ParleyPostgres
import Synchronization

/// Call signalling: runs each call's `CallStateMachine` on the loop where its invite arrived
/// (timers included) and carries out its actions through the realtime layer and the store.
///
/// The realtime session hands it `call.*` frames (`handle`) and device connection changes
/// (`deviceConnected`/`deviceDisconnected`); frames about a call owned by another loop hop to
/// that loop. Replies go through the `respond` closure the session passes with each frame.
public final class CallService: Sendable {
    /// The answer to one frame: extra `ok` fields, or the refusal.
    public typealias Respond = @Sendable (Result<JSONObject, CallError>) -> Void

    /// How long after the answer a live call's row is rewritten with the answering device. A
    /// call that ends sooner is written once, at its end.
    public static let answerRecordDelay: Duration = .seconds(1)

    public let configuration: CallConfiguration
    let group: EventLoopGroup
    let store: CallStore
    let transport: any CallTransport
    let directory: CallDirectory
    let loops: [CallLoop]
    let logger: Logger
    let relay = CallNodeRelay()
    private let running = Atomic<Bool>(false)
    private let hooks = Mutex<(any CallHooks)?>(nil)
    private let startedCounter: Counter?
    private let endedCounters: [CallEndCause: Counter]

    public init(group: EventLoopGroup, store: CallStore, transport: any CallTransport, configuration: CallConfiguration,
                metrics: MetricsRegistry? = nil, logger: Logger = Logger(label: "calls")) {
        self.group = group
        self.store = store
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        let directory = CallDirectory()
        self.directory = directory
        loops = group.loops.map { CallLoop(loop: $0) }
        startedCounter = metrics?.counter("parley_calls_started_total", help: "Call invites accepted.")
        var ended: [CallEndCause: Counter] = [:]
        if let metrics {
            for cause in CallEndCause.allCases where cause != .otherDeviceAnswered {
                ended[cause] = metrics.counter("parley_calls_ended_total", help: "Calls ended, by end cause.", labels: [("end_cause", cause.rawValue)])
            }
            metrics.addCollector {
                [MetricsRegistry.Sample(name: "parley_calls_live", help: "Calls not ended yet on this node.", value: Double(directory.count))]
            }
        }
        endedCounters = ended
    }

    /// Installs what reviews invites and hears of ended calls (block list, Cloud Code).
    public func install(hooks: any CallHooks) {
        self.hooks.withLock { $0 = hooks }
    }

    /// Live calls on this node.
    public var liveCalls: Int { directory.count }

    /// Live calls `userId` takes part in on this node.
    public func activeCalls(of userId: String) -> Int { directory.activeCalls(of: userId) }

    // MARK: Frames

    /// Handles a `call.*` frame from `device`; call on the device's connection loop. `respond`
    /// is called exactly once (possibly from another loop); the events the frame causes are sent
    /// from a later turn of the owner loop, so a reply delivered through a loop queue (a task
    /// continuation) precedes them.
    public func handle(type: String, object: JSONObject, from device: CallDevice, respond: @escaping Respond) {
        let request: CallRequest
        do {
            request = try CallRequest.parse(type: type, object, limits: configuration.limits)
        } catch {
            respond(.failure(error))
            return
        }
        switch request {
        case .invite(let invite):
            self.invite(invite, from: device, respond: respond)
        case .ringing, .answer, .established, .candidates, .negotiate, .hangup:
            forward(request, object: object, from: device, respond: respond)
        }
    }

    private func invite(_ invite: CallInvite, from device: CallDevice, respond: @escaping Respond) {
        guard invite.to != device.userId else { return respond(.failure(.cannotCallSelf)) }
        let callLoop = currentLoop()
        switch directory.reserve(callId: invite.callId, caller: device, calleeId: invite.to, loop: callLoop.loop.index,
                                 maxCallsPerUser: configuration.maxCallsPerUser) {
        case .exists: return respond(.failure(.callExists))
        case .tooManyCalls: return respond(.failure(.tooManyCalls))
        case .reserved: break
        }
        if let hooks = hooks.withLock({ $0 }), hooks.mustReview(caller: device.userId, callee: invite.to) {
            let review = CallInviteReview(callId: invite.callId, caller: device, calleeId: invite.to, video: invite.video, headers: invite.headers)
            // Frames for the call (a hang-up) wait for the review, as they wait for the store.
            let key = CallDirectory.key(invite.callId)
            onLoop(callLoop) { callLoop.beginStoring(key) }
            Task(executorPreference: callLoop.loop) { [self] in
                let refusal = await hooks.review(review)
                begin(invite, from: device, on: callLoop, refusal: refusal, respond: respond)
            }
            return
        }
        begin(invite, from: device, on: callLoop, refusal: nil, respond: respond)
    }

    /// Loop thread: a reserved invite goes on; a refused one is stored and ended with its
    /// refusal before any callee device is offered it.
    private func begin(_ invite: CallInvite, from device: CallDevice, on callLoop: CallLoop, refusal: CallRefusal?,
                       respond: @escaping Respond) {
        let machine = CallStateMachine(callId: invite.callId, caller: device, calleeId: invite.to, video: invite.video,
                                       timeouts: configuration.timeouts, now: UTCTime.nowMilliseconds())
        let record = CallRecord(machine, headers: invite.headers)
        // The callee's connections here ring at once, before the call is stored: a connected
        // callee exists, the id is new here and the callee's slot is known.
        let calleeSlot = refusal == nil && directory.claimCallee(callId: invite.callId, maxCallsPerUser: configuration.maxCallsPerUser)
        let liveOffered = calleeSlot ? transport.sendToConnectedDevices(
            CallFrames.incoming(callId: invite.callId, from: device.userId, video: invite.video, sdp: invite.sdp,
                                headers: invite.headers, expiresAt: machine.expiresAt),
            of: invite.to, except: nil) : 0
        if liveOffered > 0 {
            // A callee device rings here: the call starts now and is stored meanwhile.
            let key = CallDirectory.key(invite.callId)
            return onLoop(callLoop) { [self] in
                startBeforeStoring(machine, record: record, invite: invite, liveOffered: liveOffered, on: callLoop, respond: respond)
                // Frames held while the invite was reviewed, after the call's first actions.
                let held = callLoop.endStoring(key)
                guard !held.isEmpty, let entry = callLoop[key] else { return }
                callLoop.loop.executeLocal { [self] in
                    for frame in held { process(frame.event, from: frame.device, respond: frame.respond, entry: entry, on: callLoop) }
                }
            }
        }
        let key = CallDirectory.key(invite.callId)
        onLoop(callLoop) { if !callLoop.isStoring(key) { callLoop.beginStoring(key) } }
        Task(executorPreference: callLoop.loop) { [self] in
            let stored: Stored
            switch await store(record) {
            case .failure(let error):
                return refuse(machine, error, on: callLoop, respond: respond)
            case .success(let result):
                stored = result
            }
            let entry = CallEntry(loop: callLoop.loop, machine: machine, headers: invite.headers, sdp: invite.sdp,
                                  calleeExists: stored.calleeExists, calleeDevices: stored.calleeDevices ?? [],
                                  calleeSlot: calleeSlot, liveOffered: liveOffered)
            entry.refusal = refusal
            callLoop[entry.key] = entry
            startedCounter?.increment()
            respond(.success(JSONObject([("callId", .string(invite.callId))])))
            let actions = entry.machine.start()
            let held = callLoop.endStoring(entry.key)
            // After the reply is on its way (see `handle`).
            callLoop.loop.executeLocal { [self] in
                run(actions, entry: entry, on: callLoop)
                for frame in held {
                    process(frame.event, from: frame.device, respond: frame.respond, entry: entry, on: callLoop)
                }
                // Without the device list only the connections here were offered the call.
                if stored.calleeDevices == nil {
                    apply(.failed(error: "unavailable"), to: entry, on: callLoop)
                }
                // The caller's connection may have gone while the call was being stored.
                if entry.machine.state != .ended, !transport.isConnected(device) {
                    apply(.connectionLost(device), to: entry, on: callLoop)
                }
            }
        }
    }

    /// Loop thread: an invite whose callee rings on a connection here. The caller gets `ok` and
    /// the call runs at once, so no step of the setup waits for the database; the row is
    /// inserted meanwhile (writes wait for it), and the callee's other devices are offered the
    /// call when the insert has read them. An id found in the table, or a failed insert, ends
    /// the call with `failure` (`call_exists`, `unavailable`).
    private func startBeforeStoring(_ machine: CallStateMachine, record: CallRecord, invite: CallInvite, liveOffered: Int,
                                    on callLoop: CallLoop, respond: Respond) {
        let entry = CallEntry(loop: callLoop.loop, machine: machine, headers: invite.headers, sdp: invite.sdp,
                              calleeExists: true, calleeDevices: nil, calleeSlot: true, liveOffered: liveOffered)
        entry.row = .storing
        callLoop[entry.key] = entry
        startedCounter?.increment()
        respond(.success(JSONObject([("callId", .string(invite.callId))])))
        let actions = entry.machine.start()
        callLoop.loop.executeLocal { [self] in run(actions, entry: entry, on: callLoop) }
        Task(executorPreference: callLoop.loop) { [self] in
            switch await store(record) {
            case .failure(let error):
                entry.row = .notOurs
                apply(.failed(error: error.code), to: entry, on: callLoop)
            case .success(let stored):
                entry.row = .stored
                if entry.dirty { persist(entry) }
                if let devices = stored.calleeDevices {
                    entry.calleeDevices = devices
                    if let expiresAt = entry.offerExpiresAt { offerAway(entry, expiresAt: expiresAt, on: callLoop) }
                }
            }
        }
    }

    /// What storing an invite found: whether the callee exists, and the callee's devices (nil
    /// when they could not be read).
    private struct Stored {
        var calleeExists: Bool
        var calleeDevices: [String]?
    }

    /// Inserts a new call's row (reading the callee's devices in the same round trip when the
    /// store can): `call_exists` when the id is taken, `unavailable` when the database fails.
    private func store(_ record: CallRecord) async -> Result<Stored, CallError> {
        let insertion: CallStore.Insertion
        var calleeDevices: [String]?
        let caller = record.caller.userId, callee = record.calleeId
        let recordContact = !transport.knowsContact(from: caller, to: callee)
        if store.readsCalleeDevices {
            do {
                insertion = try await store.insert(record, recordContact: recordContact)
            } catch {
                logger.error("storing a call failed", [("callId", record.callId), ("error", "\(error)")])
                return .failure(.unavailable)
            }
            calleeDevices = insertion.calleeDevices
        } else {
            // The callee's devices are read while the call is stored (one round trip for both).
            async let devices = transport.devices(of: record.calleeId)
            do {
                insertion = try await store.insert(record, recordContact: recordContact)
            } catch {
                logger.error("storing a call failed", [("callId", record.callId), ("error", "\(error)")])
                _ = try? await devices
                return .failure(.unavailable)
            }
            do {
                calleeDevices = try await devices
            } catch {
                logger.error("reading the callee's devices failed", [("callId", record.callId), ("error", "\(error)")])
            }
        }
        if recordContact { transport.contactRecorded(from: caller, to: callee) }
        guard insertion.inserted else { return .failure(.callExists) }
        return .success(Stored(calleeExists: insertion.calleeExists, calleeDevices: calleeDevices))
    }

    /// Runs `body` on `callLoop`'s thread: now when already there.
    private func onLoop(_ callLoop: CallLoop, _ body: @escaping @Sendable () -> Void) {
        if callLoop.loop.inEventLoop {
            body()
        } else {
            callLoop.loop.execute(body)
        }
    }

    /// An invite that could not be stored (before any device was offered it): frees its id and
    /// slots and answers the caller.
    private func refuse(_ machine: CallStateMachine, _ error: CallError, on callLoop: CallLoop, respond: Respond) {
        directory.release(callId: machine.callId, ended: false)
        for frame in callLoop.endStoring(CallDirectory.key(machine.callId)) {
            frame.respond(.failure(.callNotFound))
        }
        respond(.failure(error))
    }

    private func forward(_ request: CallRequest, object: JSONObject, from device: CallDevice, respond: @escaping Respond) {
        let callId = request.callId
        let event = Self.event(for: request, from: device)
        guard let owner = directory.owner(of: callId) else {
            return answerUnknown(callId, object: object, from: device, respond: respond)
        }
        let callLoop = loops[owner]
        callLoop.loop.execute { [self] in
            let key = CallDirectory.key(callId)
            guard let entry = callLoop[key] else {
                if callLoop.isStoring(key) {
                    if !callLoop.hold(CallLoop.HeldFrame(event: event, device: device, respond: respond), for: key) {
                        respond(.failure(.limitExceeded("too many frames for a call being set up")))
                    }
                    return
                }
                return answerUnknown(callId, object: nil, from: device, respond: respond)
            }
            process(event, from: device, respond: respond, entry: entry, on: callLoop)
        }
    }

    /// Loop thread: one device frame for a live call.
    private func process(_ event: CallEvent, from device: CallDevice, respond: Respond, entry: CallEntry, on callLoop: CallLoop) {
        // A frame from a party is proof that its connection is back.
        if entry.machine.absent.contains(where: { side in self.device(of: side, in: entry) == device }) {
            apply(.connectionRestored(device), to: entry, on: callLoop)
        }
        let actions: [CallAction]
        do throws(CallError) {
            actions = try entry.machine.handle(event, now: UTCTime.nowMilliseconds())
        } catch {
            return respond(.failure(error))
        }
        // Before the reply: once the device has its `ok`, a report that it was lost must find it.
        if case .answer = event, entry.machine.answerer == device {
            directory.setAnswerer(callId: entry.machine.callId, device: device)
        }
        respond(.success(JSONObject([("callId", .string(entry.machine.callId))])))
        // The reply goes out through the loop's queue (the realtime layer answers when the
        // handler returns), so events to the same device are queued after it.
        callLoop.loop.executeLocal { [self] in run(actions, entry: entry, on: callLoop) }
    }

    /// A frame about a call not live here: sent on to the node that owns it (`object`, the
    /// frame, when it may be), or answered as ended (recently, or per the database) or unknown.
    /// Frames that may be forwarded are looked up in the relay's order, so a device's frames
    /// reach the owner in the order they arrived here.
    private func answerUnknown(_ callId: String, object: JSONObject?, from device: CallDevice, respond: @escaping Respond) {
        if directory.recentlyEnded(callId) { return respond(.failure(.callEnded)) }
        let loop = currentLoop().loop
        let route: @Sendable () async -> Void = { [self] in
            let found: CallStore.Owned?
            do {
                found = try await store.findOwned(callId)
            } catch {
                return respond(.failure(.unavailable))
            }
            guard let found, found.record.caller.userId == device.userId || found.record.calleeId == device.userId
            else { return respond(.failure(.callNotFound)) }
            guard found.record.state != .ended else { return respond(.failure(.callEnded)) }
            guard let object, let node = found.nodeId, node != store.nodeId, node != transport.nodeId
            else { return respond(.failure(.callNotFound)) }
            await forward(object, to: node, from: device, on: loop, respond: respond)
        }
        guard object != nil else {
            Task(executorPreference: loop) { await route() }
            return
        }
        if !relay.enqueue(route) { respond(.failure(.unavailable)) }
    }

    // MARK: Other nodes

    /// Sends a device's frame to the call's owner node (from the relay's queue); the owner's
    /// reply answers `respond`.
    private func forward(_ object: JSONObject, to node: String, from device: CallDevice, on loop: EventLoop, respond: @escaping Respond) async {
        guard let id = relay.waitForReply(respond, on: loop) else {
            return respond(.failure(.limitExceeded("too many frames waiting for another node")))
        }
        let message = JSONObject([
            ("op", .string("frame")), ("from", .string(transport.nodeId)), ("req", .string(id)),
            ("userId", .string(device.userId)), ("deviceId", .string(device.deviceId)), ("frame", .object(object)),
        ])
        relay.addRemoteParty(device, node: node)
        do {
            if try await transport.send(message, toNode: node) { return }
            relay.complete(id, .failure(.limitExceeded("frame too long to relay to another node")))
        } catch {
            logger.warning("forwarding a call frame to another node failed", [("node", node), ("error", "\(error)")])
            relay.complete(id, .failure(.unavailable))
        }
    }

    /// A message from another node's call service: a frame for a call owned here, the reply to
    /// a frame forwarded from here, or a device of a call owned here that left that node or
    /// came back to it.
    /// Malformed messages are ignored.
    public func received(fromNode message: JSONObject) {
        switch message["op"]?.string {
        case "frame":
            guard let node = message["from"]?.string, let id = message["req"]?.string, let userId = message["userId"]?.string,
                  let deviceId = message["deviceId"]?.string, let frame = message["frame"]?.object, let type = frame["type"]?.string
            else { return }
            let device = CallDevice(userId: userId, deviceId: deviceId)
            let transport = self.transport, relay = self.relay
            let reply: Respond = { result in
                var answer: [(String, JSONValue)] = [("op", .string("reply")), ("req", .string(id))]
                switch result {
                case .success(let fields):
                    answer.append(("ok", .object(fields)))
                case .failure(let error):
                    answer.append(("error", .string(error.code)))
                    answer.append(("message", .string(error.description)))
                }
                let object = JSONObject(answer)
                relay.enqueue { _ = try? await transport.send(object, toNode: node) }
            }
            // Only frames about a call live here (an invite always starts on the caller's node).
            guard type != "call.invite" else { return reply(.failure(.invalidRequest("an invite is not forwarded"))) }
            group.loops[0].execute { [self] in handle(type: type, object: frame, from: device, respond: reply) }
        case "reply":
            guard let id = message["req"]?.string else { return }
            if let fields = message["ok"]?.object {
                relay.complete(id, .success(fields))
            } else if let code = message["error"]?.string {
                relay.complete(id, .failure(CallError(code: code, message: message["message"]?.string ?? code)))
            }
        case "lost":
            guard let userId = message["userId"]?.string, let deviceId = message["deviceId"]?.string else { return }
            let device = CallDevice(userId: userId, deviceId: deviceId)
            // Connected here again meanwhile: not lost.
            guard !transport.isConnected(device) else { return }
            notifyCalls(of: device, .connectionLost(device))
        case "back":
            guard let userId = message["userId"]?.string, let deviceId = message["deviceId"]?.string else { return }
            let device = CallDevice(userId: userId, deviceId: deviceId)
            notifyCalls(of: device, .connectionRestored(device))
        default:
            return
        }
    }

    /// Live delivery to a party on another node, after the relays before it.
    private func relayElsewhere(_ frame: JSONObject, to device: CallDevice) {
        let transport = self.transport, logger = self.logger
        relay.enqueue {
            do {
                _ = try await transport.relay(frame, to: device)
            } catch {
                logger.warning("relaying a call event to another node failed", [("type", frame["type"]?.string ?? ""), ("error", "\(error)")])
            }
        }
    }

    static func event(for request: CallRequest, from device: CallDevice) -> CallEvent {
        switch request {
        case .invite:
            preconditionFailure("an invite creates a call; it is no event of one")
        case .ringing:
            return .ringing(from: device)
        case .answer(_, let sdp):
            return .answer(from: device, sdp: sdp)
        case .established:
            return .established(from: device)
        case .candidates(_, let candidates):
            return .candidates(from: device, candidates: candidates)
        case .negotiate(_, let sdp, let kind):
            return .negotiate(from: device, payload: JSONObject([("sdp", .string(sdp)), ("kind", .string(kind))]))
        case .hangup(_, let busy):
            return .hangup(from: device, busy: busy)
        }
    }

    // MARK: Connections

    /// A device's connection opened (after `welcome`); any thread. The calls it takes part in
    /// here, and those owned by the nodes its frames were forwarded to from here, see it back
    /// (ending its grace period).
    public func deviceConnected(_ device: CallDevice) {
        notifyCalls(of: device, .connectionRestored(device))
        let transport = self.transport
        for node in relay.ownerNodes(of: device) {
            let message = JSONObject([("op", .string("back")), ("userId", .string(device.userId)), ("deviceId", .string(device.deviceId))])
            relay.enqueue { _ = try? await transport.send(message, toNode: node) }
        }
    }

    /// A device's connection closed and no newer connection of the same device replaced it;
    /// any thread.
    public func deviceDisconnected(_ device: CallDevice) {
        notifyCalls(of: device, .connectionLost(device))
        // Calls owned by other nodes that this device's frames were forwarded to.
        let transport = self.transport
        for node in relay.ownerNodes(of: device) {
            let message = JSONObject([("op", .string("lost")), ("userId", .string(device.userId)), ("deviceId", .string(device.deviceId))])
            relay.enqueue { _ = try? await transport.send(message, toNode: node) }
        }
    }

    private func notifyCalls(of device: CallDevice, _ event: CallEvent) {
        for (key, index) in directory.calls(of: device) {
            let callLoop = loops[index]
            callLoop.loop.execute { [self] in
                guard let entry = callLoop[key] else { return }
                apply(event, to: entry, on: callLoop)
            }
        }
    }

    // MARK: Actions

    /// Loop thread: feeds an event that refuses nothing (routing, connection, timer).
    private func apply(_ event: CallEvent, to entry: CallEntry, on callLoop: CallLoop) {
        guard let actions = try? entry.machine.handle(event, now: UTCTime.nowMilliseconds()) else { return }
        run(actions, entry: entry, on: callLoop)
    }

    /// Loop thread: carries out the actions in order.
    private func run(_ actions: [CallAction], entry: CallEntry, on callLoop: CallLoop) {
        callLoop.loop.preconditionInEventLoop()
        // `call.ended` goes to both parties: its details are built once.
        var built: (message: CallMessage, frame: JSONObject)?
        for action in actions {
            switch action {
            case .send(let message, let recipient):
                let frame: JSONObject
                if let built, built.message == message {
                    frame = built.frame
                } else {
                    frame = CallFrames.event(message, record: entry.record, deviceLabel: transport.label(of:))
                    built = (message, frame)
                }
                deliver(message, frame: frame, to: recipient, entry: entry)
            case .arm(let timer, let delay):
                let key = entry.key
                entry.timers[timer] = callLoop.loop.schedule(after: delay) { [self] in
                    guard let entry = callLoop[key] else { return }
                    entry.timers[timer] = nil
                    // A party that reconnected without a frame since is back all the same.
                    if case .grace(let side) = timer, let device = device(of: side, in: entry), transport.isConnected(device) {
                        return apply(.connectionRestored(device), to: entry, on: callLoop)
                    }
                    apply(.timerFired(timer), to: entry, on: callLoop)
                }
            case .cancel(let timer):
                if let id = entry.timers.removeValue(forKey: timer) { callLoop.loop.cancel(id) }
            case .persist:
                // The row is written at the invite and rewritten at the end; the steps between
                // reach it with that write. A call still answered a moment after the answer is
                // rewritten then too, so a sweep after a node loss knows the answering device
                // (most setups that end at once cost no extra statement).
                switch entry.machine.state {
                case .ended:
                    persist(entry)
                case .answered, .established:
                    persistAnswerLater(entry, on: callLoop)
                case .initiating, .progressing, .ringing:
                    break
                }
            case .offer(let expiresAt):
                offer(entry, expiresAt: expiresAt, on: callLoop)
            case .finish:
                finish(entry, on: callLoop)
            }
        }
    }

    /// Reports the callee's connections that got `call.incoming` at the invite, and queues it
    /// for the callee's other devices (offline, or on another node) once they are known.
    private func offer(_ entry: CallEntry, expiresAt: Int64, on callLoop: CallLoop) {
        if let refusal = entry.refusal { return apply(.refused(refusal), to: entry, on: callLoop) }
        guard entry.calleeExists else { return apply(.calleeUnknown, to: entry, on: callLoop) }
        guard entry.calleeSlot else { return apply(.calleeBusy, to: entry, on: callLoop) }
        if entry.liveOffered > 0 { apply(.offered(deviceCount: entry.liveOffered), to: entry, on: callLoop) }
        entry.offerExpiresAt = expiresAt
        if entry.calleeDevices != nil { offerAway(entry, expiresAt: expiresAt, on: callLoop) }
    }

    /// Queues `call.incoming` for the callee's devices not connected here, unless the call was
    /// answered or ended before they were known.
    private func offerAway(_ entry: CallEntry, expiresAt: Int64, on callLoop: CallLoop) {
        let machine = entry.machine
        guard machine.state != .ended, !machine.state.isAnswered else { return }
        let calleeId = machine.calleeId
        let away = (entry.calleeDevices ?? []).filter { !transport.isConnected(CallDevice(userId: calleeId, deviceId: $0)) }
        guard !away.isEmpty else { return }
        entry.queuedOffered = Set(away)
        let frame = CallFrames.incoming(callId: machine.callId, from: machine.caller.userId, video: machine.details.video, sdp: entry.sdp,
                                        headers: entry.headers, expiresAt: expiresAt)
        let liveCount = entry.liveOffered
        queueForCallee(entry, frame, devices: away, expiresAt: expiresAt) { [self] result in
            switch result {
            case .success(let count):
                apply(.offered(deviceCount: count), to: entry, on: callLoop)
            case .failure(let error):
                logger.warning("queueing call.incoming failed", [("callId", machine.callId), ("error", "\(error)")])
                if liveCount == 0 { apply(.failed(error: "unavailable"), to: entry, on: callLoop) }
            }
        }
    }

    private func deliver(_ message: CallMessage, frame: JSONObject, to recipient: CallRecipient, entry: CallEntry) {
        let isEnded = if case .ended = message { true } else { false }
        switch recipient {
        case .caller:
            deliver(frame, toParty: entry.machine.caller, queueIfAway: isEnded)
        case .answerer:
            guard let answerer = entry.machine.answerer else { return }
            deliver(frame, toParty: answerer, queueIfAway: isEnded)
        case .calleeDevices(let except):
            // The way each device was offered the call: live, or through its queue (after the
            // invite, so that a device that was offline learns the end when it connects).
            if entry.liveOffered > 0 {
                transport.sendToConnectedDevices(frame, of: entry.machine.calleeId, except: except)
            }
            let queued = entry.queuedOffered.filter { $0 != except }.sorted()
            guard !queued.isEmpty else { return }
            let expiresAt = max(entry.machine.expiresAt, UTCTime.nowMilliseconds() + configuration.timeouts.grace.milliseconds)
            queueForCallee(entry, frame, devices: queued, expiresAt: expiresAt, completion: nil)
        }
    }

    /// Queues an event for callee devices after the ones queued before it for this call.
    private func queueForCallee(_ entry: CallEntry, _ frame: JSONObject, devices: [String], expiresAt: Int64,
                                completion: ((Result<Int, any Error>) -> Void)?) {
        entry.calleeEvents.append(CallEntry.CalleeEvent(frame: frame, devices: devices, expiresAt: expiresAt, completion: completion))
        guard !entry.calleeEventsDraining else { return }
        entry.calleeEventsDraining = true
        let calleeId = entry.machine.calleeId
        Task(executorPreference: entry.loop) { [self] in
            while !entry.calleeEvents.isEmpty {
                let event = entry.calleeEvents.removeFirst()
                let result: Result<Int, any Error>
                do {
                    result = .success(try await transport.enqueue(event.frame, forDevicesOf: calleeId, only: event.devices, expiresAt: event.expiresAt))
                } catch {
                    result = .failure(error)
                    if event.completion == nil {
                        logger.warning("queueing a call event failed", [("type", event.frame["type"]?.string ?? ""), ("error", "\(error)")])
                    }
                }
                event.completion?(result)
            }
            entry.calleeEventsDraining = false
        }
    }

    /// Live to the party's device, here or relayed to the node it is connected to; a
    /// `call.ended` for a device not connected here is queued for the grace period instead
    /// (the queue reaches it on any node, and if it comes back later).
    private func deliver(_ frame: JSONObject, toParty device: CallDevice, queueIfAway: Bool) {
        guard !transport.send(frame, to: device) else { return }
        guard queueIfAway else { return relayElsewhere(frame, to: device) }
        enqueue(frame, for: device, expiresAt: UTCTime.nowMilliseconds() + configuration.timeouts.grace.milliseconds)
    }

    private func enqueue(_ frame: JSONObject, for device: CallDevice, expiresAt: Int64) {
        let transport = self.transport, logger = self.logger
        Task {
            do {
                _ = try await transport.enqueue(frame, forDevicesOf: device.userId, only: [device.deviceId], expiresAt: expiresAt)
            } catch {
                logger.warning("queueing a call event failed", [("type", frame["type"]?.string ?? ""), ("error", "\(error)")])
            }
        }
    }

    /// The device of a party of an answered call.
    private func device(of side: CallSide, in entry: CallEntry) -> CallDevice? {
        side == .caller ? entry.machine.caller : entry.machine.answerer
    }

    /// Writes the call's record; writes requested while one is in flight collapse into one more.
    private func persist(_ entry: CallEntry) {
        switch entry.row {
        case .stored: break
        case .storing: return entry.dirty = true
        case .notOurs: return
        }
        if entry.writing {
            entry.dirty = true
            return
        }
        entry.writing = true
        Task(executorPreference: entry.loop) { [self] in
            repeat {
                entry.dirty = false
                let record = entry.record
                do {
                    try await store.update(record)
                } catch {
                    logger.error("updating a call failed", [("callId", record.callId), ("error", "\(error)")])
                }
            } while entry.dirty
            entry.writing = false
        }
    }

    /// Rewrites an answered call's row after `answerRecordDelay`, if it has not ended by then.
    private func persistAnswerLater(_ entry: CallEntry, on callLoop: CallLoop) {
        guard !entry.answerRecorded, entry.answerRecordTimer == nil else { return }
        let key = entry.key
        entry.answerRecordTimer = callLoop.loop.schedule(after: Self.answerRecordDelay) { [self] in
            guard let entry = callLoop[key] else { return }
            entry.answerRecordTimer = nil
            entry.answerRecorded = true
            persist(entry)
        }
    }

    private func finish(_ entry: CallEntry, on callLoop: CallLoop) {
        callLoop[entry.key] = nil
        for id in entry.timers.values { callLoop.loop.cancel(id) }
        entry.timers = [:]
        if let id = entry.answerRecordTimer { callLoop.loop.cancel(id) }
        entry.answerRecordTimer = nil
        directory.release(callId: entry.machine.callId, ended: true)
        if let cause = entry.machine.details.endCause { endedCounters[cause]?.increment() }
        if let hooks = hooks.withLock({ $0 }), case .object(let details) = entry.record.json(deviceLabel: transport.label(of:)) {
            hooks.callEnded(details)
        }
        logger.debug("call ended", [("callId", entry.machine.callId), ("endCause", entry.machine.details.endCause?.rawValue ?? "")])
    }

    // MARK: REST

    /// `GET /v1/calls` for `userId`: `{results: [details…]}`, newest first, before the call
    /// `before` when given.
    public func history(userId: String, before: String?, limit: Int) async throws(CallError) -> JSONValue {
        if let before, !CallRequest.isUUID(before) { throw .invalidRequest("\"before\" must be a callId") }
        do {
            let records = try await store.history(userId: userId, before: before, limit: limit)
            return ["results": .array(records.map { $0.json(deviceLabel: transport.label(of:)) })]
        } catch {
            throw .unavailable
        }
    }

    /// `GET /v1/turn` for `userId`: credentials, or `{}` when TURN is not configured.
    public func turnCredentials(for userId: String) -> JSONValue {
        guard let turn = configuration.turn else { return .object(JSONObject()) }
        return TURNCredentials(userId: userId, configuration: turn, nowSeconds: UTCTime.nowMilliseconds() / 1000).json
    }

    /// Starts closing, now and then every `interval`, the calls that nodes which stopped
    /// heartbeating for `nodeStaleAfter` left live in the table.
    public func start(nodeStaleAfter: Duration, interval: Duration = .seconds(60)) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let loop = group.loops[0]
        loop.execute { [self] in sweep(every: interval, staleAfter: nodeStaleAfter, on: loop, after: .seconds(1)) }
    }

    /// Stops the periodic sweep.
    public func shutdown() {
        running.store(false, ordering: .releasing)
    }

    private func sweep(every interval: Duration, staleAfter: Duration, on loop: EventLoop, after delay: Duration) {
        loop.schedule(after: delay) { [self] in
            guard running.load(ordering: .acquiring) else { return }
            Task(executorPreference: loop) { [self] in
                await endAbandonedCalls(nodeStaleAfter: staleAfter)
                sweep(every: interval, staleAfter: staleAfter, on: loop, after: interval)
            }
        }
    }

    /// Closes, as `failure`/`node_lost`, the calls a stopped node (or this node's previous run)
    /// left live in the table, and queues their `call.ended` for the parties: the caller's
    /// device and the answering device, or every callee device when none answered (a device
    /// connected to a live node gets it at once, the others when they come back within the
    /// grace period).
    @discardableResult
    public func endAbandonedCalls(nodeStaleAfter: Duration) async -> Int {
        let records: [CallRecord]
        do {
            records = try await store.endAbandonedCalls(liveNodes: try await store.liveNodes(staleAfter: nodeStaleAfter), error: "node_lost")
        } catch {
            logger.error("closing abandoned calls failed", [("error", "\(error)")])
            return 0
        }
        guard !records.isEmpty else { return 0 }
        logger.notice("closed calls left live by a stopped node", [("count", "\(records.count)")])
        let expiresAt = UTCTime.nowMilliseconds() + configuration.timeouts.grace.milliseconds
        for record in records {
            let frame = CallFrames.event(.ended(.failure, error: "node_lost"), record: record, deviceLabel: transport.label(of:))
            do {
                _ = try await transport.enqueue(frame, forDevicesOf: record.caller.userId, only: [record.caller.deviceId], expiresAt: expiresAt)
                let callee: [String]
                if let answerer = record.answerDevice {
                    callee = [answerer]
                } else {
                    callee = try await transport.devices(of: record.calleeId)
                }
                if !callee.isEmpty { _ = try await transport.enqueue(frame, forDevicesOf: record.calleeId, only: callee, expiresAt: expiresAt) }
            } catch {
                logger.warning("queueing call.ended for a call of a stopped node failed", [("callId", record.callId), ("error", "\(error)")])
            }
        }
        return records.count
    }

    // MARK: Loops

    /// The calling loop's state, or the next loop's when called off the group's loops.
    private func currentLoop() -> CallLoop {
        if let current = EventLoop.current, current.index < loops.count, loops[current.index].loop === current {
            return loops[current.index]
        }
        return loops[group.next().index]
    }
}
