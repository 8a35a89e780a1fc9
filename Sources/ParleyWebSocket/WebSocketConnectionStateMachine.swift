/// The code and reason of a close frame.
public struct WebSocketCloseStatus: Sendable, Equatable {
    public var code: WebSocketCloseCode
    public var reason: String

    public init(code: WebSocketCloseCode, reason: String = "") {
        self.code = code
        self.reason = reason
    }
}

/// One side of a WebSocket connection as a sans-I/O state machine (RFC 6455): the server's by
/// default, a client's with `role: .client` (frames it sends are masked, frames it receives
/// must not be).
///
/// Bytes from the peer go in, actions come out: frames to send, messages to deliver, and when to
/// close the TCP connection. It reassembles fragmented messages (validating text as UTF-8 while
/// it arrives), answers pings, enforces the control-frame, size and close-code rules, and runs
/// the close handshake: open → closing (we sent close) → closed. A protocol error sends a close
/// frame with the matching code (1002, 1007, 1009) and then closes.
///
/// Memory: between messages it holds no buffers; a reassembly buffer exists only while a message
/// is arriving.
public struct WebSocketConnectionStateMachine: Sendable {
    /// Size limits for incoming data.
    public struct Limits: Sendable, Equatable {
        /// Largest accepted frame payload (1009 above it).
        public var maxFrameSize: Int
        /// Largest accepted message, summed over its fragments (1009 above it).
        public var maxMessageSize: Int

        public init(maxFrameSize: Int = 1 << 20, maxMessageSize: Int = 1 << 20) {
            self.maxFrameSize = maxFrameSize
            self.maxMessageSize = maxMessageSize
        }
    }

    /// Where the close handshake stands.
    public enum State: Sendable, Equatable {
        /// Messages flow both ways.
        case open
        /// We sent a close frame and wait for the peer's.
        case closing
        /// The handshake finished or the connection failed; the TCP connection should close.
        case closed
    }

    /// What the caller must do, in order.
    public enum Action: Sendable, Equatable {
        /// Write these bytes (one encoded frame).
        case send([UInt8])
        /// A complete, valid text message.
        case deliverText(String)
        /// A complete binary message.
        case deliverBinary([UInt8])
        /// A pong arrived (the peer is alive).
        case receivedPong([UInt8])
        /// Close the TCP connection once queued bytes are written (the server closes first).
        case closeConnection
    }

    /// Which end of the connection this is.
    public enum Role: Sendable, Equatable {
        /// Receives masked frames, sends unmasked ones.
        case server
        /// Receives unmasked frames, masks every frame it sends with a fresh random key.
        case client
    }

    public let limits: Limits
    public let role: Role
    public private(set) var state = State.open
    /// The close frame the peer sent, if any (code 1005 when it carried none).
    public private(set) var receivedClose: WebSocketCloseStatus?
    /// The close frame we sent, if any.
    public private(set) var sentClose: WebSocketCloseStatus?
    /// The protocol error that failed the connection, if any.
    public private(set) var failure: WebSocketProtocolError?

    private var decoder: WebSocketFrameDecoder
    private var frame: WebSocketFrameHeader?
    private var messageOpcode: WebSocketOpcode?
    private var message: [UInt8] = []
    private var control: [UInt8] = []
    private var utf8 = UTF8StreamValidator()
    private var closeConnectionPending = false

    /// Reassembly buffers are reserved up front at most this large; beyond, they grow as bytes arrive.
    private static let maxReservation = 256 * 1024

    public init(limits: Limits = Limits(), role: Role = .server) {
        self.limits = limits
        self.role = role
        self.decoder = WebSocketFrameDecoder(maxFrameSize: min(limits.maxFrameSize, limits.maxMessageSize),
                                             expectsMaskedFrames: role == .server)
    }

    /// The masking key for the next frame this side sends: nil on a server, a random key on a
    /// client (RFC 6455 section 5.3: unpredictable, from the system's random source).
    public var nextMaskingKey: UInt32? {
        guard role == .client else { return nil }
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// A single-frame text message from this side (masked on a client).
    public func textFrame(_ text: String) -> [UInt8] {
        WebSocketFrameEncoder.text(text, maskingKey: nextMaskingKey)
    }

    /// A single-frame binary message from this side (masked on a client).
    public func binaryFrame(_ bytes: [UInt8]) -> [UInt8] {
        WebSocketFrameEncoder.binary(bytes, maskingKey: nextMaskingKey)
    }

    /// Bytes held in reassembly buffers right now (zero between messages).
    public var bufferedBytes: Int { message.capacity + control.capacity }

    // MARK: Input

    /// Decodes `input[offset...]` up to the next action, advancing `offset`; nil once the input
    /// is used up (or the connection is closed). Call it until nil, acting on each action before
    /// asking for the next, so a reply to one message goes out before a later error's close frame.
    public mutating func next(_ input: UnsafeRawBufferPointer, offset: inout Int) -> Action? {
        if closeConnectionPending {
            closeConnectionPending = false
            return .closeConnection
        }
        guard state != .closed else { return nil }
        do {
            while true {
                let step: WebSocketFrameDecoder.Step?
                if let frame, frame.opcode.isControl {
                    step = try decoder.next(input, offset: &offset, appendingPayloadTo: &control)
                } else {
                    step = try decoder.next(input, offset: &offset, appendingPayloadTo: &message)
                }
                guard let step else { return nil }
                switch step {
                case .header(let header):
                    try begin(header)
                case .payload(let count):
                    if messageOpcode == .text, let frame, !frame.opcode.isControl {
                        try validateText(last: count)
                    }
                case .frameEnd:
                    if let action = try finishFrame() { return action }
                }
            }
        } catch {
            return fail(error)
        }
    }

    /// Feeds bytes and collects every action (for tests; the handler uses `next`).
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) -> [Action] {
        var actions: [Action] = []
        var offset = 0
        while let action = next(bytes, offset: &offset) { actions.append(action) }
        return actions
    }

    /// Feeds bytes from an array and collects every action.
    public mutating func receive(_ bytes: [UInt8]) -> [Action] {
        bytes.withUnsafeBytes { receive($0) }
    }

    private mutating func begin(_ header: WebSocketFrameHeader) throws(WebSocketProtocolError) {
        if header.opcode.isControl {
            frame = header
            return
        }
        switch header.opcode {
        case .continuation:
            guard messageOpcode != nil else { throw .unexpectedContinuation }
        default:
            guard messageOpcode == nil else { throw .expectedContinuation }
            messageOpcode = header.opcode
            utf8 = UTF8StreamValidator()
        }
        guard header.payloadLength <= limits.maxMessageSize - message.count else { throw .messageTooLarge }
        if message.isEmpty && header.payloadLength > 0 {
            message.reserveCapacity(min(header.payloadLength, Self.maxReservation))
        }
        frame = header
    }

    private mutating func validateText(last count: Int) throws(WebSocketProtocolError) {
        let valid = message.withUnsafeBytes { raw in
            utf8.validate(UnsafeRawBufferPointer(rebasing: raw[(raw.count - count)...]))
        }
        if !valid { throw .invalidUTF8 }
    }

    private mutating func finishFrame() throws(WebSocketProtocolError) -> Action? {
        guard let header = frame else { return nil }
        frame = nil
        switch header.opcode {
        case .ping:
            let payload = control
            control = []
            return state == .open ? .send(WebSocketFrameEncoder.encode(opcode: .pong, payload: payload, maskingKey: nextMaskingKey)) : nil
        case .pong:
            let payload = control
            control = []
            return .receivedPong(payload)
        case .close:
            let payload = control
            control = []
            return try receiveClose(payload)
        case .continuation, .text, .binary:
            guard header.fin, let opcode = messageOpcode else { return nil }
            if opcode == .text && !utf8.isAtCharacterBoundary { throw .invalidUTF8 }
            let completed = message
            message = []
            messageOpcode = nil
            guard state == .open else { return nil }
            return opcode == .text ? .deliverText(String(decoding: completed, as: UTF8.self)) : .deliverBinary(completed)
        }
    }

    private mutating func receiveClose(_ payload: [UInt8]) throws(WebSocketProtocolError) -> Action {
        var status = WebSocketCloseStatus(code: .noStatusReceived)
        if payload.count == 1 { throw .invalidClosePayload }
        if payload.count >= 2 {
            let code = WebSocketCloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
            guard code.isValidOnWire else { throw .invalidCloseCode(code.rawValue) }
            let reason = payload[2...]
            guard reason.withUnsafeBytes({ UTF8StreamValidator.isValid($0) }) else { throw .invalidUTF8 }
            status = WebSocketCloseStatus(code: code, reason: String(decoding: reason, as: UTF8.self))
        }
        receivedClose = status
        let wasOpen = state == .open
        state = .closed
        releaseBuffers()
        guard wasOpen else { return .closeConnection }
        // Echo the code (none if none came); the server then closes the TCP connection first
        // (a client closes its side too once the echo is written).
        sentClose = WebSocketCloseStatus(code: status.code)
        closeConnectionPending = true
        return .send(WebSocketFrameEncoder.close(code: payload.isEmpty ? nil : status.code, maskingKey: nextMaskingKey))
    }

    private mutating func fail(_ error: WebSocketProtocolError) -> Action {
        failure = error
        let wasOpen = state == .open
        state = .closed
        releaseBuffers()
        guard wasOpen else { return .closeConnection }
        let status = WebSocketCloseStatus(code: error.closeCode, reason: error.description)
        sentClose = status
        closeConnectionPending = true
        return .send(WebSocketFrameEncoder.close(code: status.code, reason: status.reason, maskingKey: nextMaskingKey))
    }

    private mutating func releaseBuffers() {
        message = []
        control = []
        messageOpcode = nil
        frame = nil
    }

    // MARK: Output

    /// Starts the close handshake; returns the close frame to send, or nil if not open.
    public mutating func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") -> [UInt8]? {
        guard state == .open else { return nil }
        state = .closing
        sentClose = WebSocketCloseStatus(code: code, reason: reason)
        return WebSocketFrameEncoder.close(code: code, reason: reason, maskingKey: nextMaskingKey)
    }

    /// Marks the connection closed without a handshake (the socket dropped or timed out).
    public mutating func connectionDropped() {
        state = .closed
        closeConnectionPending = false
        releaseBuffers()
    }

    /// A ping frame, or nil if not open.
    public func ping(payload: [UInt8] = []) -> [UInt8]? {
        guard state == .open else { return nil }
        return WebSocketFrameEncoder.encode(opcode: .ping, payload: Array(payload.prefix(125)), maskingKey: nextMaskingKey)
    }

    /// True while data frames may be sent.
    public var canSend: Bool { state == .open }
}
