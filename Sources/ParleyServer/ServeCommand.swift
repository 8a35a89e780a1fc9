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
        let runtime = try ServerRuntime(config: config, logger: logger)
        defer { runtime.stopDatabase() }
        try runtime.start()

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
}
