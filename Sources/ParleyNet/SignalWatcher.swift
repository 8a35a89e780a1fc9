#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Delivers SIGTERM/SIGINT (or other signals) through a `signalfd` on an event loop.
///
/// Create it on the main thread before any other thread starts, so every thread inherits the
/// blocked signal mask and the signals reach only the `signalfd`.
public final class SignalWatcher: IOHandler, @unchecked Sendable {
    private let fd: Int32
    private let loop: EventLoop
    private let onSignal: (Int32) -> Void

    /// Ignores SIGPIPE for the process: a write to a socket the peer closed fails with EPIPE
    /// instead of killing the server (`send` passes MSG_NOSIGNAL, `sendfile` cannot).
    public static func ignoreBrokenPipes() {
        _ = parley_ignore_sigpipe()
    }

    /// Blocks `signals` for the process and opens the signalfd (call early, on the main thread).
    public static func blockSignals(_ signals: [Int32]) throws(NetError) -> Int32 {
        let fd = signals.withUnsafeBufferPointer { parley_signalfd_block($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { throw NetError.lastError("signalfd") }
        return fd
    }

    /// Watches the signalfd on `loop`; `onSignal` runs on the loop thread. Loop thread only.
    public init(signalFD: Int32, loop: EventLoop, onSignal: @escaping (Int32) -> Void) throws(NetError) {
        self.fd = signalFD
        self.loop = loop
        self.onSignal = onSignal
        try loop.register(fd: signalFD, interest: .readable, handler: self)
    }

    public func handleReadable() {
        while true {
            let signal = parley_signalfd_read(fd)
            if signal <= 0 { return }
            onSignal(signal)
        }
    }

    public func handleWritable() {}

    /// Stops watching and closes the signalfd. Loop thread only.
    public func close() {
        loop.deregister(fd: fd)
        Glibc.close(fd)
    }
}
