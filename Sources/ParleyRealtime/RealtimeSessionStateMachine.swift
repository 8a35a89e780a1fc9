/// The sans-I/O core of one realtime connection: session phases (awaiting hello → authenticating
/// → open → closed) and the device's delivery cursor. Frames and database results go in; actions
/// come out. The connection (`RealtimeConnection`) performs the actions.
///
/// Delivery cursor: `delivered` is the highest seq sent on this connection. Seqs of a device are
/// assigned under a row lock held until commit, so once seq S is committed every seq below it is
/// committed (or gone: acknowledged, expired). A live event with the next seq is sent at once; one
/// that skips ahead, a hint from another node, or a reconnect of the notification channel starts a
/// read from the queue instead. While a read runs, or while the peer's outbound buffer is above
/// the high-water mark, live events are not sent; the cursor remembers the highest seq it heard of
/// (`wanted`) and reads again afterwards. Events therefore go out in seq order, each at most once
/// per connection.
public struct RealtimeSessionStateMachine: Sendable {
    /// Where the session is.
    public enum Phase: Sendable, Equatable {
        case awaitingHello, authenticating, open, closed
    }

    /// What the connection must do, in order.
    public enum Action: Sendable, Equatable {
        /// Send a frame that is not a queued event (`welcome`, `ok`, `error`).
        case send([UInt8])
        /// Close the WebSocket with this code.
        case close(code: UInt16, reason: String)
        /// Check the session token and register the device, then call `authenticated` or `authenticationFailed`.
        case authenticate(HelloFrame)
        /// Run a request of the open session.
        case handle(ClientFrame)
        /// Read queued events with seq greater than `after` (one page), then call `replayEvent` for
        /// each row and `fetchCompleted`.
        case fetch(after: Int64)
    }

    /// What to do with a live event.
    public enum LiveDecision: Sendable, Equatable {
        /// Send it now.
        case send
        /// Drop it (already sent, or a read will bring it).
        case skip
        /// Drop it and read the queue.
        case fetch(after: Int64)
    }

    public private(set) var phase = Phase.awaitingHello
    public private(set) var userId: String?
    public private(set) var deviceId: String?
    /// Highest seq sent on this connection (starts at the hello's `resumeAfter`).
    public private(set) var delivered: Int64 = 0
    /// Highest seq this connection heard of.
    public private(set) var wanted: Int64 = 0
    /// A queue read is in flight.
    public private(set) var fetching = false
    /// The peer's outbound buffer is above the high-water mark.
    public private(set) var blocked = false
    private var fetchStartWanted: Int64 = 0
    private var refetch = false
    /// Highest seq the client may acknowledge: what it was sent, or said it had in `hello`.
    private var ackCeiling: Int64 = 0
    private var held: [ClientFrame] = []
    private let limits: ClientFrameLimits
    private let maxHeldFrames: Int

    public init(limits: ClientFrameLimits, maxHeldFrames: Int = 64) {
        self.limits = limits
        self.maxHeldFrames = maxHeldFrames
    }

    // MARK: Frames

    /// A text frame from the client.
    public mutating func receivedText(_ text: String) -> [Action] {
        switch phase {
        case .closed:
            return []
        case .awaitingHello:
            do {
                let frame = try ClientFrame.parse(text, limits: limits)
                guard case .hello(let hello) = frame else {
                    return fail(.helloRequired, "the first frame must be hello", close: RealtimeCloseCode.protocolViolation)
                }
                phase = .authenticating
                return [.authenticate(hello)]
            } catch {
                if error.isHello {
                    return fail(error.code, error.message, re: error.id, close: RealtimeCloseCode.protocolViolation)
                }
                return fail(.helloRequired, "the first frame must be hello (\(error.message))", re: error.id,
                            close: RealtimeCloseCode.protocolViolation)
            }
        case .authenticating, .open:
            let frame: ClientFrame
            do {
                frame = try ClientFrame.parse(text, limits: limits)
            } catch {
                return [.send(ServerFrame.error(re: error.id, code: error.code, message: error.message))]
            }
            if case .hello = frame {
                return [.send(ServerFrame.error(re: nil, code: .alreadyAuthenticated, message: "hello was already received"))]
            }
            if phase == .open { return [.handle(frame)] }
            guard held.count < maxHeldFrames else {
                return [.send(ServerFrame.error(re: requestID(of: frame), code: .tooManyPending,
                                                message: "too many frames before welcome"))]
            }
            held.append(frame)
            return []
        }
    }

    /// The hello deadline passed.
    public mutating func helloTimedOut() -> [Action] {
        guard phase == .awaitingHello else { return [] }
        return fail(.helloTimeout, "no hello within the deadline", close: RealtimeCloseCode.helloTimeout)
    }

    // MARK: Authentication

    /// The token was valid and the device registered: `welcome`, the replay, then held requests.
    public mutating func authenticated(userId: String, deviceId: String, resumeAfter: Int64, lastSeq: Int64, trimmedSeq: Int64) -> [Action] {
        guard phase == .authenticating else { return [] }
        phase = .open
        self.userId = userId
        self.deviceId = deviceId
        let reset = resumeAfter > lastSeq
        let start = reset ? 0 : resumeAfter
        delivered = start
        ackCeiling = start
        wanted = max(wanted, lastSeq)
        let gap = trimmedSeq > start
        var actions: [Action] = [.send(ServerFrame.welcome(userId: userId, deviceId: deviceId, lastSeq: lastSeq, gap: gap, reset: reset))]
        if wanted > delivered || refetch { actions.append(startFetch()) }
        actions.append(contentsOf: held.map { .handle($0) })
        held = []
        return actions
    }

    /// Authentication or registration failed: an `error` frame, then close.
    public mutating func authenticationFailed(_ code: RealtimeErrorCode, _ message: String, closeCode: UInt16) -> [Action] {
        guard phase == .authenticating || phase == .awaitingHello else { return [] }
        return fail(code, message, close: closeCode)
    }

    /// A newer connection of the same device took over.
    public mutating func replaced() -> [Action] {
        guard phase != .closed else { return [] }
        phase = .closed
        held = []
        return [.close(code: RealtimeCloseCode.replaced, reason: "replaced by a newer connection of this device")]
    }

    /// The session token expired: close with 4007; nothing the client sends is handled any more.
    public mutating func sessionExpired() -> [Action] {
        guard phase == .open || phase == .authenticating else { return [] }
        phase = .closed
        held = []
        return [.close(code: RealtimeCloseCode.sessionExpired, reason: "session expired")]
    }

    /// Ends the session (the socket closed, or a close was sent).
    public mutating func closed() {
        phase = .closed
        held = []
    }

    // MARK: Delivery

    /// An event committed for this device (seq), pushed by this node.
    public mutating func liveEvent(seq: Int64) -> LiveDecision {
        switch phase {
        case .awaitingHello, .closed:
            return .skip
        case .authenticating:
            wanted = max(wanted, seq)
            return .skip
        case .open:
            if seq <= delivered { return .skip }
            if fetching || blocked {
                wanted = max(wanted, seq)
                return .skip
            }
            if seq == delivered + 1 {
                delivered = seq
                ackCeiling = max(ackCeiling, seq)
                wanted = max(wanted, seq)
                return .send
            }
            wanted = max(wanted, seq)
            guard case .fetch(let after) = startFetch() else { return .skip }
            return .fetch(after: after)
        }
    }

    /// Another node committed an event with this seq for the device (no frame: read the queue).
    public mutating func hinted(seq: Int64) -> Action? {
        wanted = max(wanted, seq)
        guard phase == .open, seq > delivered, !fetching, !blocked else { return nil }
        return startFetch()
    }

    /// Notifications may have been missed (the listener reconnected): read the queue.
    public mutating func resynchronize() -> Action? {
        guard phase == .open || phase == .authenticating else { return nil }
        refetch = true
        guard phase == .open, !fetching, !blocked else { return nil }
        return startFetch()
    }

    /// A row of the page being read: true if it must be sent now (in order, not yet sent, and
    /// the peer is keeping up).
    public mutating func replayEvent(seq: Int64) -> Bool {
        guard phase == .open, !blocked, seq > delivered else { return false }
        delivered = seq
        ackCeiling = max(ackCeiling, seq)
        wanted = max(wanted, seq)
        return true
    }

    /// The page read finished; `full` when it returned as many rows as asked (there may be more).
    public mutating func fetchCompleted(full: Bool) -> Action? {
        guard fetching else { return nil }
        fetching = false
        guard phase == .open else { return nil }
        if blocked {
            // Rows of this page may be unsent: read again once the peer drains.
            refetch = true
            return nil
        }
        if full { return startFetch() }
        // Everything up to what we knew of when the read started was visible to it.
        delivered = max(delivered, fetchStartWanted)
        ackCeiling = max(ackCeiling, delivered)
        if wanted > delivered || refetch { return startFetch() }
        return nil
    }

    /// The page read failed; the connection retries after a pause with `retryFetch`.
    public mutating func fetchFailed() {
        fetching = false
        refetch = true
    }

    /// The pause after a failed read is over.
    public mutating func retryFetch() -> Action? {
        guard phase == .open, !fetching, !blocked else { return nil }
        return startFetch()
    }

    /// The peer's outbound buffer passed the high-water mark: stop sending events.
    public mutating func outboundBlocked() {
        blocked = true
    }

    /// The peer's outbound buffer is empty again: catch up from the queue if needed.
    public mutating func outboundDrained() -> Action? {
        guard blocked else { return nil }
        blocked = false
        guard phase == .open, !fetching, wanted > delivered || refetch else { return nil }
        return startFetch()
    }

    /// The seq to acknowledge for a client's `ack upTo` (nothing above what it was sent or had).
    public func acknowledgeable(upTo: Int64) -> Int64 {
        min(upTo, ackCeiling)
    }

    // MARK: Helpers

    private mutating func startFetch() -> Action {
        fetching = true
        refetch = false
        fetchStartWanted = wanted
        return .fetch(after: delivered)
    }

    private mutating func fail(_ code: RealtimeErrorCode, _ message: String, re: RequestID? = nil, close: UInt16) -> [Action] {
        phase = .closed
        held = []
        return [.send(ServerFrame.error(re: re, code: code, message: message)), .close(code: close, reason: code.rawValue)]
    }

    private func requestID(of frame: ClientFrame) -> RequestID? {
        switch frame {
        case .hello: nil
        case .send(let id, _): id
        case .ack(let id, _), .read(let id, _), .presenceSubscribe(let id, _), .presenceUnsubscribe(let id, _): id
        case .typing(let id, _, _): id
        case .other(_, let id, _): id
        }
    }
}
