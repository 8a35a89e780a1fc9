#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A non-blocking stream socket owned by one event loop.
///
/// Reads go through the loop's shared read buffer; writes are queued (bounded by
/// `maxOutboundBytes`) and flushed with `writev`. A peer that takes none of the queued output
/// for `slowReaderTimeout` is disconnected, whatever it sends meanwhile. Loop thread only.
public final class Connection: IOHandler {
    /// The loop that owns the connection.
    public let loop: EventLoop
    /// A process-unique number, for logs.
    public let id: UInt64
    /// `host:port` of the peer.
    public let remoteAddress: String
    /// The protocol code fed by this connection.
    public var handler: (any ConnectionHandler)?

    let fd: Int32
    private let readBuffer: ReadBuffer
    private let maxOutboundBytes: Int
    private var outbound: [[UInt8]] = []
    private var outboundHead = 0
    private var headOffset = 0
    private var pending = 0
    private var state = State.open
    private var readingPaused = false
    /// `writeFile` filled the socket: wait for it to be writable, then report a drain.
    private var fileWaiting = false
    private var eofReceived = false
    private var lingerTimer: TimerID?
    /// Nanoseconds; 0 turns the slow-reader check off.
    private let slowReaderTimeout: UInt64
    /// When queued output last moved (queued onto an empty queue, or partly written).
    private var lastProgress: UInt64 = 0
    private var slowReaderTimer: TimerID?
    var onClose: ((Connection) -> Void)?
    /// The TLS session once `startTLS` ran: reads are decrypted before the handler sees them,
    /// writes encrypted before the socket does.
    private var tls: TLSLayer?

    private enum State { case open, closing, lingering, closed }

    /// Bytes queued but not yet written.
    public var pendingOutboundBytes: Int { pending }
    /// True once the socket is closed.
    public var isClosed: Bool { state == .closed }
    /// True until `close` is called or the connection fails.
    public var isOpen: Bool { state == .open }
    /// The TLS session, when the connection is encrypted.
    public var tlsSession: TLSConnection? { tls?.session }

    init(
        fd: Int32, loop: EventLoop, id: UInt64, remoteAddress: String, readBuffer: ReadBuffer, maxOutboundBytes: Int,
        slowReaderTimeout: Duration = .zero
    ) {
        self.fd = fd
        self.loop = loop
        self.id = id
        self.remoteAddress = remoteAddress
        self.readBuffer = readBuffer
        self.maxOutboundBytes = maxOutboundBytes
        let (seconds, attoseconds) = slowReaderTimeout.components
        self.slowReaderTimeout = seconds < 0 ? 0 : UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    func activate() throws(NetError) {
        try loop.register(fd: fd, interest: .readable, handler: self)
    }

    // MARK: Writing

    /// Queues `bytes` and writes what the socket takes now.
    public func write(_ bytes: [UInt8]) {
        guard state == .open, !bytes.isEmpty else { return }
        if let tls { return bytes.withUnsafeBytes { encrypt($0, tls) } }
        if pending == 0 {
            let written = bytes.withUnsafeBytes { raw in Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) }
            if written == bytes.count { return }
            if written < 0 {
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                    closeNow()
                    return
                }
                enqueue(bytes, offset: 0)
            } else {
                enqueue(bytes, offset: written)
            }
        } else {
            enqueue(bytes, offset: 0)
        }
    }

    /// Writes what the socket takes of `bytes` now and queues a copy of the rest; `bytes` need
    /// only stay valid during the call (a loop's scratch memory, say).
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard state == .open, !bytes.isEmpty else { return }
        if let tls { return encrypt(bytes, tls) }
        writeToSocket(bytes)
    }

    /// Writes ciphertext or plain bytes to the socket, queueing what it does not take.
    private func writeToSocket(_ bytes: UnsafeRawBufferPointer) {
        guard pending == 0 else {
            enqueue(Array(bytes), offset: 0)
            return
        }
        let written = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if written == bytes.count { return }
        if written < 0 {
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                closeNow()
                return
            }
            enqueue(Array(bytes), offset: 0)
        } else {
            enqueue(Array(UnsafeRawBufferPointer(rebasing: bytes[written...])), offset: 0)
        }
    }

    /// Sends up to `count` bytes of file `fd` from `offset` with `sendfile(2)`, copied by the
    /// kernel, never queued. Only with nothing queued (else nothing is sent: the drain follows)
    /// and without TLS.
    public func writeFile(_ file: Int32, offset: Int, count: Int) -> FileWriteResult {
        guard state == .open, tls == nil else { return .failed }
        guard pending == 0, !fileWaiting else { return .wrote(0) }
        var position = Int64(offset)
        while true {
            let n = parley_sendfile(fd, file, &position, count)
            if n > 0 {
                lastProgress = EventLoop.monotonicNanoseconds()
                if n < count { waitForRoom() }
                return .wrote(n)
            }
            if n == 0 { return count == 0 ? .wrote(0) : .endOfFile }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                waitForRoom()
                return .wrote(0)
            }
            closeNow()
            return .failed
        }
    }

    private func waitForRoom() {
        fileWaiting = true
        armSlowReaderCheck()
        updateInterest()
    }

    /// Queues the readable bytes of `buffer`.
    public func write(_ buffer: ByteBuffer) {
        write(buffer.readableArray)
    }

    private func enqueue(_ bytes: [UInt8], offset: Int) {
        if outbound.isEmpty {
            headOffset = offset
            lastProgress = EventLoop.monotonicNanoseconds()
            armSlowReaderCheck()
        }
        outbound.append(bytes)
        pending += bytes.count - offset
        if pending > maxOutboundBytes {
            closeNow()
            return
        }
        updateInterest()
    }

    /// Writes queued bytes with writev until the socket would block; returns false on error.
    private func flush() -> Bool {
        while pending > 0 {
            let count = min(outbound.count - outboundHead, 64)
            let written: Int = withUnsafeTemporaryAllocation(of: iovec.self, capacity: count) { iov in
                writeChunks(iov: iov, count: count)
            }
            if written < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return true }
                if errno == EINTR { continue }
                return false
            }
            if written > 0 { lastProgress = loop.iterationNanoseconds }
            consume(written)
        }
        return true
    }

    /// Checks, `slowReaderTimeout` after the last progress, that queued output has moved since.
    private func armSlowReaderCheck() {
        guard slowReaderTimeout > 0, slowReaderTimer == nil, state != .closed else { return }
        let now = EventLoop.monotonicNanoseconds()
        let due = lastProgress &+ slowReaderTimeout
        let delay = due > now ? due - now : 0
        slowReaderTimer = loop.schedule(after: .nanoseconds(Int64(delay))) { [weak self] in
            guard let self else { return }
            self.slowReaderTimer = nil
            guard self.state != .closed, self.pending > 0 || self.fileWaiting else { return }
            if EventLoop.monotonicNanoseconds() &- self.lastProgress >= self.slowReaderTimeout {
                self.closeNow()
            } else {
                self.armSlowReaderCheck()
            }
        }
    }

    private func writeChunks(iov: UnsafeMutableBufferPointer<iovec>, count: Int) -> Int {
        // Each array's storage stays alive and unmoved while `outbound` is not mutated.
        for i in 0..<count {
            let chunk = outbound[outboundHead + i]
            let skip = i == 0 ? headOffset : 0
            chunk.withUnsafeBytes { raw in
                iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + skip), iov_len: raw.count - skip)
            }
        }
        return Glibc.writev(fd, iov.baseAddress, Int32(count))
    }

    private func consume(_ written: Int) {
        pending -= written
        var left = written
        while left > 0 {
            let available = outbound[outboundHead].count - headOffset
            if left >= available {
                left -= available
                // Written: its storage goes now, not when the queue is next compacted (a
                // streamed answer keeps the queue from emptying; 64 written chunks were held).
                outbound[outboundHead] = []
                outboundHead += 1
                headOffset = 0
            } else {
                headOffset += left
                left = 0
            }
        }
        if outboundHead == outbound.count {
            outbound.removeAll()
            outboundHead = 0
            headOffset = 0
        } else if outboundHead > 64 {
            outbound.removeFirst(outboundHead)
            outboundHead = 0
        }
    }

    // MARK: Reading

    /// Stops reading until `resumeReading` (backpressure).
    public func pauseReading() {
        guard !readingPaused else { return }
        readingPaused = true
        updateInterest()
    }

    public func resumeReading() {
        guard readingPaused else { return }
        readingPaused = false
        updateInterest()
        if let tls, tls.session.hasBufferedInput {
            // Records already taken from the socket would otherwise wait for the next packet.
            loop.executeLocal { [weak self] in
                guard let self, self.state == .open, !self.readingPaused, self.tls === tls else { return }
                self.deliverPlaintext(tls)
            }
        }
    }

    private func updateInterest() {
        guard state != .closed else { return }
        var interest: IOInterest = []
        if pending > 0 || fileWaiting { interest.insert(.writable) }
        switch state {
        case .open where !readingPaused && !eofReceived, .lingering:
            interest.insert(.readable)
        default:
            break
        }
        loop.setInterest(fd: fd, interest)
    }

    public func handleReadable() {
        if eofReceived && state != .lingering {
            // Hang-up or error after the peer's FIN: nothing more can arrive.
            closeNow()
            return
        }
        var rounds = 0
        while state != .closed && rounds < 4 {
            let n = Glibc.recv(fd, readBuffer.pointer, readBuffer.capacity, 0)
            if n > 0 {
                if state == .lingering {
                    rounds += 1
                    continue
                }
                if let tls {
                    decrypt(UnsafeRawBufferPointer(start: readBuffer.pointer, count: n), tls)
                } else {
                    handler?.connection(self, didRead: UnsafeRawBufferPointer(start: readBuffer.pointer, count: n))
                }
                if readingPaused || state != .open || n < readBuffer.capacity { return }
                rounds += 1
            } else if n == 0 {
                if state == .lingering {
                    closeNow()
                    return
                }
                eofReceived = true
                updateInterest()
                if let handler { handler.connectionDidReceiveEOF(self) } else { close() }
                return
            } else {
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                if errno == EINTR { continue }
                closeNow()
                return
            }
        }
    }

    public func handleWritable() {
        guard state != .closed else { return }
        guard flush() else {
            closeNow()
            return
        }
        guard pending == 0 else { return }
        fileWaiting = false
        updateInterest()
        if state == .closing {
            finishClosing()
        } else if state == .open {
            handler?.connectionDidDrain(self)
        }
    }

    // MARK: Closing

    /// Flushes what is queued and closes; with `immediately`, drops the queue and closes now.
    public func close(immediately: Bool = false) {
        if state == .open, !immediately, let tls, tls.session.state == .established {
            tls.session.shutdown()
            flushCiphertext(tls)
        }
        switch state {
        case .closed, .lingering:
            if immediately { closeNow() }
        case .closing:
            if immediately { closeNow() }
        case .open:
            if immediately || pending == 0 {
                if immediately || eofReceived { closeNow() } else { finishClosing() }
            } else {
                state = .closing
                updateInterest()
            }
        }
    }

    /// Sends FIN and reads until the peer closes (bounded), so a response is not lost to a reset.
    private func finishClosing() {
        if eofReceived {
            closeNow()
            return
        }
        state = .lingering
        _ = Glibc.shutdown(fd, PARLEY_SHUT_WR)
        updateInterest()
        lingerTimer = loop.schedule(after: .seconds(2)) { [weak self] in
            self?.lingerTimer = nil
            self?.closeNow()
        }
    }

    private func closeNow() {
        guard state != .closed else { return }
        state = .closed
        if let lingerTimer { loop.cancel(lingerTimer) }
        lingerTimer = nil
        if let slowReaderTimer { loop.cancel(slowReaderTimer) }
        slowReaderTimer = nil
        if let timer = tls?.handshakeTimer { loop.cancel(timer) }
        tls?.handshakeTimer = nil
        loop.deregister(fd: fd)
        Glibc.close(fd)
        outbound = []
        pending = 0
        let handler = self.handler
        let onClose = self.onClose
        self.onClose = nil
        if let tls, let onHandshake = tls.onHandshake {
            tls.onHandshake = nil
            onHandshake(.failure(.closed))
        }
        loop.executeLocal { [self] in
            handler?.connectionDidClose(self)
            self.handler = nil
            onClose?(self)
        }
    }
}

// MARK: TLS

/// A connection's TLS session and its handshake bookkeeping. Loop thread only.
final class TLSLayer {
    let session: TLSConnection
    var handshakeTimer: TimerID?
    var onHandshake: ((Result<Void, TLSError>) -> Void)?

    init(session: TLSConnection, onHandshake: ((Result<Void, TLSError>) -> Void)?) {
        self.session = session
        self.onHandshake = onHandshake
    }
}

extension Connection {
    /// Plaintext handed to the session per `SSL_write`, so its output buffer stays small.
    private static let tlsWriteChunk = 16 * 1024

    /// Encrypts the connection from now on: the handler reads and writes plaintext, the socket
    /// carries `session`'s records. A client session sends its hello at once. A handshake not
    /// done within `handshakeTimeout` closes the connection; `onHandshake` runs once with the
    /// outcome (a failed verification, an alert, the deadline or a close) before the handler's
    /// `connectionDidClose`. Loop thread only; call before anything else is written.
    public func startTLS(_ session: TLSConnection, handshakeTimeout: Duration,
                         onHandshake: ((Result<Void, TLSError>) -> Void)? = nil) {
        guard state == .open, tls == nil else { return }
        let layer = TLSLayer(session: session, onHandshake: onHandshake)
        tls = layer
        layer.handshakeTimer = loop.schedule(after: handshakeTimeout) { [weak self, weak layer] in
            guard let self, let layer else { return }
            layer.handshakeTimer = nil
            if layer.session.state == .handshaking {
                self.failTLS(.handshakeFailed("no handshake within \(handshakeTimeout)"), layer, immediately: true)
            }
        }
        do {
            try session.start()
        } catch {
            return failTLS(error, layer)
        }
        flushCiphertext(layer)
    }

    fileprivate func encrypt(_ plaintext: UnsafeRawBufferPointer, _ tls: TLSLayer) {
        var offset = 0
        while offset < plaintext.count && state == .open {
            let end = min(plaintext.count, offset + Self.tlsWriteChunk)
            do {
                try tls.session.send(UnsafeRawBufferPointer(rebasing: plaintext[offset..<end]))
            } catch {
                return failTLS(error, tls)
            }
            flushCiphertext(tls)
            offset = end
        }
    }

    /// Writes the session's pending records to the socket.
    fileprivate func flushCiphertext(_ tls: TLSLayer) {
        let scratch = loop.tlsScratch
        while true {
            let count = tls.session.readOutput(into: UnsafeMutableRawBufferPointer(start: scratch.pointer, count: scratch.capacity))
            if count == 0 { return }
            writeToSocket(UnsafeRawBufferPointer(start: scratch.pointer, count: count))
        }
    }

    fileprivate func decrypt(_ ciphertext: UnsafeRawBufferPointer, _ tls: TLSLayer) {
        let wasHandshaking = tls.session.state == .handshaking
        do {
            try tls.session.feed(ciphertext)
        } catch {
            return failTLS(error, tls)
        }
        flushCiphertext(tls)
        if wasHandshaking {
            guard tls.session.state == .established else { return }
            if let timer = tls.handshakeTimer { loop.cancel(timer) }
            tls.handshakeTimer = nil
            if let onHandshake = tls.onHandshake {
                tls.onHandshake = nil
                onHandshake(.success(()))
            }
        }
        deliverPlaintext(tls)
    }

    /// Decrypts what the session holds into the loop's read buffer and hands it to the handler,
    /// until nothing is left or the handler pauses reading. The ciphertext was copied into the
    /// session before, so the read buffer is free.
    fileprivate func deliverPlaintext(_ tls: TLSLayer) {
        let buffer = UnsafeMutableRawBufferPointer(start: readBuffer.pointer, count: readBuffer.capacity)
        while state == .open && !readingPaused {
            let count: Int
            do {
                count = try tls.session.readPlaintext(into: buffer)
            } catch {
                return failTLS(error, tls)
            }
            if count > 0 { handler?.connection(self, didRead: UnsafeRawBufferPointer(start: buffer.baseAddress, count: count)) }
            if tls.session.state == .closed {
                flushCiphertext(tls)
                return peerClosedTLS()
            }
            if count < buffer.count { break }
        }
        if isOpen { flushCiphertext(tls) }
    }

    /// Sends the session's alert (unless `immediately`), reports a failed handshake, closes.
    fileprivate func failTLS(_ error: TLSError, _ tls: TLSLayer, immediately: Bool = false) {
        if !immediately { flushCiphertext(tls) }
        if let onHandshake = tls.onHandshake {
            tls.onHandshake = nil
            onHandshake(.failure(error))
        }
        close(immediately: immediately)
    }

    /// The peer sent close_notify: nothing more will come, as with a FIN.
    private func peerClosedTLS() {
        guard state == .open else { return }
        eofReceived = true
        updateInterest()
        if let handler { handler.connectionDidReceiveEOF(self) } else { close() }
    }
}

/// A loop's shared read buffer: every connection of the loop reads through it.
final class ReadBuffer {
    let pointer: UnsafeMutableRawPointer
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        pointer = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { pointer.deallocate() }
}
