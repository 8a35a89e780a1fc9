import ParleyMetrics

/// The realtime service's Prometheus metrics.
final class RealtimeMetrics: Sendable {
    private let batches: Counter?
    private let messages: Counter?
    private let batchSizes: Histogram?

    init(connections: ConnectionRegistry, metrics: MetricsRegistry?) {
        guard let metrics else {
            batches = nil
            messages = nil
            batchSizes = nil
            return
        }
        batches = metrics.counter("parley_realtime_send_batches_total", help: "Group commits of message sends.")
        messages = metrics.counter("parley_realtime_send_requests_total", help: "Message sends committed through group commit.")
        batchSizes = metrics.histogram("parley_realtime_send_batch_size", help: "Messages per group commit.",
                                       buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
        metrics.addCollector {
            [.init(name: "parley_realtime_connections", help: "Authenticated realtime connections on this node.",
                   value: Double(connections.count))]
        }
    }

    func recordBatch(size: Int) {
        batches?.increment()
        messages?.increment(by: size)
        batchSizes?.observe(Double(size))
    }
}
