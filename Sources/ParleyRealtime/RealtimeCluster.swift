import ParleyLog
import ParleyNet
import ParleyPostgres

/// This node's end of the LISTEN/NOTIFY links between nodes: listens on `parley_rt_<node>`
/// (events, replacements, typing for devices connected here) and `parley_rt_presence`, and
/// broadcasts presence changes.
///
/// Thread confinement: the listener lives on `loop`; `start`, `stop` and `broadcast` may be
/// called from any thread (they hop). `@unchecked Sendable` for that reason.
final class RealtimeCluster: @unchecked Sendable {
    static let presenceChannel = "parley_rt_presence"

    let loop: EventLoop
    let nodeID: String
    private let configuration: PostgresConfiguration
    private let logger: Logger
    /// Set once by the service before `start`.
    weak var service: RealtimeService?
    private var listener: PostgresListener?
    /// Relayed messages arriving in chunks (loop thread).
    private var assembler = RelayAssembler()

    init(loop: EventLoop, nodeID: String, configuration: PostgresConfiguration, logger: Logger) {
        self.loop = loop
        self.nodeID = nodeID
        self.configuration = configuration
        self.logger = logger
    }

    var channel: String { "parley_rt_" + nodeID }

    func start() {
        loop.execute { [self] in
            guard listener == nil else { return }
            let listener = PostgresListener(loop: loop, configuration: configuration, logger: logger) { [weak self] notification in
                guard let self, let service else { return }
                for message in ClusterMessage.parse(notification.payload) {
                    guard case .chunk(let id, let index, let count, let data) = message else {
                        service.received(message)
                        continue
                    }
                    if let body = assembler.add(id: id, index: index, count: count, data: data) { service.receivedRelay(body) }
                }
            }
            listener.onReconnect = { [weak self] in
                self?.logger.notice("realtime listener reconnected; resynchronising connections")
                self?.service?.resynchronizeAll()
            }
            listener.listen(channel)
            listener.listen(Self.presenceChannel)
            listener.start()
            self.listener = listener
        }
    }

    func stop() {
        loop.execute { [self] in
            listener?.close()
            listener = nil
        }
    }

    /// Sends a message to every node (presence).
    func broadcast(_ message: ClusterMessage) {
        guard let service else { return }
        let database = service.database
        let line = message.line
        Task {
            _ = try? await database.notify(channel: Self.presenceChannel, payload: line)
        }
    }
}
