#if canImport(Glibc)
import Glibc
#endif
import ParleyHTTP
import ParleyLog
import ParleyNet
import ParleyPostgres

/// `parley serve`: provisions the database, applies migrations, serves until SIGTERM/SIGINT;
/// SIGHUP reloads the TLS certificates.
public enum ServeCommand {
    public static func run(_ config: ServerConfig) throws -> Int32 {
        let logger = Logger(label: "server")
        // Before any thread starts, so every thread inherits the blocked mask.
        let signalFD = try SignalWatcher.blockSignals([SIGTERM, SIGINT, SIGHUP])
        SignalWatcher.ignoreBrokenPipes()
        let runtime = try ServerRuntime(config: config, logger: logger)
        defer { runtime.stopDatabase() }
        try runtime.start()
        if let path = config.portFile {
            try writePortFile(path, port: runtime.port, tlsPort: config.tls?.port == nil ? nil : runtime.tlsPort)
        }

        let stopRequested = Latch()
        runtime.group.loops[0].execute {
            do {
                // The loop's registration keeps the watcher alive until the process exits.
                _ = try SignalWatcher(signalFD: signalFD, loop: runtime.group.loops[0]) { signal in
                    if signal == SIGHUP { return runtime.reloadCertificates() }
                    logger.notice("signal received, shutting down", [("signal", "\(signal)")])
                    stopRequested.open()
                }
            } catch {
                logger.error("cannot watch signals", [("error", "\(error)")])
            }
        }
        stopRequested.wait()
        runtime.shutdown()
        logger.notice("stopped")
        return 0
    }

    /// Writes `port` on the first line (and `tls <tlsPort>` on a second when TLS has its own
    /// listener) through a temporary file renamed into place, so a reader sees no file or all of it.
    static func writePortFile(_ path: String, port: Int, tlsPort: Int?) throws(ServerError) {
        let temporary = path + ".tmp"
        let text = Array(("\(port)\n" + (tlsPort.map { "tls \($0)\n" } ?? "")).utf8)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .startFailed("cannot create the port file \(temporary): errno \(errno)") }
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == text.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw .startFailed("cannot write the port file \(path): errno \(errno)")
        }
    }
}
