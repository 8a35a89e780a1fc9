import ParleyLog
import ParleyNet

/// A dedicated connection that LISTENs to channels and delivers each NOTIFY to a callback on its
/// loop. Channels can be added and removed at any time; after a reconnect every channel is
/// LISTENed again and `onReconnect` runs (notifications sent while disconnected are lost, so the
/// owner can resynchronise there).
///
/// Thread confinement: create and use on `loop` (checked); `@unchecked Sendable` so a reference
/// can be held by Sendable wiring code that hops to the loop before calling it.
public final class PostgresListener: PostgresConnectionDelegate, @unchecked Sendable {
    public let loop: EventLoop
    private let connection: PostgresConnection
    private let logger: Logger
    private var channels: Set<String> = []
    private var listened: Set<String> = []
    private var connectedBefore = false
    /// Runs after the connection was re-established and every channel LISTENed again.
    public var onReconnect: (() -> Void)?
    /// Runs each time every channel is LISTENed on a fresh connection, the first one included:
    /// from then on no notification is missed until `onDisconnect`.
    public var onListening: (() -> Void)?
    /// Runs when the connection is lost (notifications are missed until `onListening`).
    public var onDisconnect: (() -> Void)?
    /// Live numbers of the listener's connection.
    public let stats = PostgresPoolStats()

    /// Creates the listener on `loop` (must be called on it); `onNotification` runs on the loop.
    public init(loop: EventLoop, configuration: PostgresConfiguration, logger: Logger = Logger(label: "postgres.listener"),
                onNotification: @escaping (PostgresNotification) -> Void) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.logger = logger
        var settings = configuration
        settings.statementTimeout = nil
        settings.maxPreparedStatements = 0
        connection = PostgresConnection(loop: loop, configuration: settings, stats: stats, logger: logger)
        connection.onNotification = onNotification
        connection.delegate = self
    }

    /// Connects (loop thread); channels added before or after are LISTENed once connected.
    public func start() {
        loop.preconditionInEventLoop()
        connection.connect()
    }

    /// Channels currently requested.
    public var channelNames: Set<String> { channels }

    /// Starts listening to `channel` (loop thread; idempotent).
    public func listen(_ channel: String) {
        loop.preconditionInEventLoop()
        guard channels.insert(channel).inserted else { return }
        if connection.state == .ready { sendListen(channel) }
    }

    /// Stops listening to `channel` (loop thread).
    public func unlisten(_ channel: String) {
        loop.preconditionInEventLoop()
        guard channels.remove(channel) != nil else { return }
        if connection.state == .ready, listened.remove(channel) != nil {
            connection.send("UNLISTEN \(EmbeddedPostgres.quoteIdentifier(channel))", [], prepared: false) { [logger] result in
                if case .failure(let error) = result { logger.warning("UNLISTEN failed", [("channel", channel), ("error", "\(error)")]) }
            }
        }
    }

    /// Closes the connection for good (loop thread).
    public func close() {
        loop.preconditionInEventLoop()
        connection.close()
    }

    /// True when connected and every requested channel has been LISTENed.
    public var isListening: Bool { connection.state == .ready && listened == channels }

    private func sendListen(_ channel: String) {
        connection.send("LISTEN \(EmbeddedPostgres.quoteIdentifier(channel))", [], prepared: false) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                if self.channels.contains(channel) { self.listened.insert(channel) }
            case .failure(let error):
                self.logger.warning("LISTEN failed", [("channel", channel), ("error", "\(error)")])
            }
        }
    }

    // MARK: PostgresConnectionDelegate

    func connectionBecameReady(_ connection: PostgresConnection) {
        listened.removeAll()
        for channel in channels.sorted() { sendListen(channel) }
        let reconnected = connectedBefore
        if (reconnected && onReconnect != nil) || onListening != nil {
            // After the LISTENs: a statement pipelined behind them completes once they took effect.
            connection.send("SELECT 1", [], prepared: false) { [weak self] result in
                guard let self, case .success = result else { return }
                if reconnected { self.onReconnect?() }
                self.onListening?()
            }
        }
        connectedBefore = true
    }

    func connectionLost(_ connection: PostgresConnection) {
        listened.removeAll()
        onDisconnect?()
    }

    func connectionAttemptFailed(_ connection: PostgresConnection) {}

    func connectionFinishedStatements(_ connection: PostgresConnection) {}
}
