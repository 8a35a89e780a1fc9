import Synchronization

/// Observations counted into cumulative buckets (Prometheus histogram).
public final class Histogram: MetricChild {
    /// Seconds from 100 µs to 10 s.
    public static let defaultBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Snapshot {
        var counts: [Int]
        var sum: Double
        var count: Int
    }

    let bounds: [Double]
    private let state: Mutex<Snapshot>

    init(buckets: [Double]) {
        bounds = buckets.sorted()
        state = Mutex(Snapshot(counts: Array(repeating: 0, count: buckets.count), sum: 0, count: 0))
    }

    public func observe(_ value: Double) {
        var index = 0
        while index < bounds.count, !(value <= bounds[index]) { index += 1 }
        state.withLock { s in
            if index < s.counts.count { s.counts[index] += 1 }
            s.sum += value
            s.count += 1
        }
    }

    /// Total observations so far.
    public var count: Int { state.withLock { $0.count } }

    func snapshot() -> Snapshot { state.withLock { $0 } }

    func render(name: String, labels: [(String, String)], into out: inout String) {
        Histogram.render(snapshot(), bounds: bounds, name: name, labels: labels, into: &out)
    }

    static func render(_ snapshot: Snapshot, bounds: [Double], name: String, labels: [(String, String)], into out: inout String) {
        var cumulative = 0
        for (i, bound) in bounds.enumerated() {
            cumulative += snapshot.counts[i]
            out += "\(name)_bucket\(MetricFamily.labelText(labels + [("le", MetricFamily.number(bound))])) \(cumulative)\n"
        }
        out += "\(name)_bucket\(MetricFamily.labelText(labels + [("le", "+Inf")])) \(snapshot.count)\n"
        out += "\(name)_sum\(MetricFamily.labelText(labels)) \(snapshot.sum)\n"
        out += "\(name)_count\(MetricFamily.labelText(labels)) \(snapshot.count)\n"
    }
}
