import Synchronization

/// A set of named metrics rendered in the Prometheus text exposition format.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[String: MetricFamily]>([:])
    private let order = Mutex<[String]>([])
    private let collectors = Mutex<[@Sendable () -> [Sample]]>([])

    public init() {}

    /// A gauge value computed when the metrics are rendered.
    public struct Sample: Sendable {
        public var name: String
        public var help: String
        public var labels: [(String, String)]
        public var value: Double

        public init(name: String, help: String, labels: [(String, String)] = [], value: Double) {
            self.name = name
            self.help = help
            self.labels = labels
            self.value = value
        }
    }

    /// Returns the counter with this name and labels, creating it on first use.
    public func counter(_ name: String, help: String, labels: [(String, String)] = []) -> Counter {
        family(name, help: help, kind: "counter").child(labels: labels) { Counter() } as! Counter
    }

    /// Returns the gauge with this name and labels, creating it on first use.
    public func gauge(_ name: String, help: String, labels: [(String, String)] = []) -> Gauge {
        family(name, help: help, kind: "gauge").child(labels: labels) { Gauge() } as! Gauge
    }

    /// Returns the histogram with this name and labels, creating it on first use.
    public func histogram(_ name: String, help: String, labels: [(String, String)] = [], buckets: [Double] = Histogram.defaultBuckets) -> Histogram {
        family(name, help: help, kind: "histogram").child(labels: labels) { Histogram(buckets: buckets) } as! Histogram
    }

    /// Returns shard `shard` of the counter with this name and labels, creating it on first use.
    ///
    /// Give each writer thread (an event loop) its own shard so hot counters are never contended;
    /// the exposition shows one series, the sum of the shards. A name and labels are either
    /// sharded or not.
    public func counter(_ name: String, help: String, labels: [(String, String)] = [], shard: Int) -> Counter {
        let shards = family(name, help: help, kind: "counter").child(labels: labels) { ShardedCounter() }
        guard let shards = shards as? ShardedCounter else { preconditionFailure("MetricsRegistry: \(name) is not sharded") }
        return shards.shard(shard)
    }

    /// Returns shard `shard` of the histogram with this name and labels (see `counter(_:help:labels:shard:)`).
    public func histogram(
        _ name: String, help: String, labels: [(String, String)] = [], buckets: [Double] = Histogram.defaultBuckets, shard: Int
    ) -> Histogram {
        let shards = family(name, help: help, kind: "histogram").child(labels: labels) { ShardedHistogram(buckets: buckets) }
        guard let shards = shards as? ShardedHistogram else { preconditionFailure("MetricsRegistry: \(name) is not sharded") }
        return shards.shard(shard)
    }

    /// Registers a closure that produces gauge samples at render time (pool sizes, queue depths).
    public func addCollector(_ collector: @escaping @Sendable () -> [Sample]) {
        collectors.withLock { $0.append(collector) }
    }

    /// Renders every metric in the Prometheus text format (version 0.0.4).
    public func render() -> String {
        var out = ""
        let names = order.withLock { $0 }
        for name in names {
            guard let family = families.withLock({ $0[name] }) else { continue }
            family.render(into: &out)
        }
        var seenHelp = Set<String>()
        for collector in collectors.withLock({ $0 }) {
            for sample in collector() {
                if seenHelp.insert(sample.name).inserted {
                    out += "# HELP \(sample.name) \(sample.help)\n# TYPE \(sample.name) gauge\n"
                }
                out += "\(sample.name)\(MetricFamily.labelText(sample.labels)) \(MetricFamily.number(sample.value))\n"
            }
        }
        return out
    }

    private func family(_ name: String, help: String, kind: String) -> MetricFamily {
        families.withLock { map in
            if let existing = map[name] { return existing }
            let created = MetricFamily(name: name, help: help, kind: kind)
            map[name] = created
            order.withLock { $0.append(name) }
            return created
        }
    }
}

/// Something a metric family can render.
protocol MetricChild: AnyObject, Sendable {
    func render(name: String, labels: [(String, String)], into out: inout String)
}

final class MetricFamily: Sendable {
    let name: String
    let help: String
    let kind: String
    private let children = Mutex<[(key: String, labels: [(String, String)], child: any MetricChild)]>([])

    init(name: String, help: String, kind: String) {
        self.name = name
        self.help = help
        self.kind = kind
    }

    func child(labels: [(String, String)], make: () -> any MetricChild) -> any MetricChild {
        let key = MetricFamily.labelText(labels)
        return children.withLock { list in
            if let found = list.first(where: { $0.key == key }) { return found.child }
            let created = make()
            list.append((key, labels, created))
            return created
        }
    }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(kind)\n"
        for entry in children.withLock({ $0 }) {
            entry.child.render(name: name, labels: entry.labels, into: &out)
        }
    }

    static func labelText(_ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return "" }
        let parts = labels.map { key, value -> String in
            var escaped = ""
            for c in value {
                switch c {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "\n": escaped += "\\n"
                default: escaped.append(c)
                }
            }
            return "\(key)=\"\(escaped)\""
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
