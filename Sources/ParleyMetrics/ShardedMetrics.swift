import Synchronization

/// A counter kept as one `Counter` per writer (shard) and rendered as their sum.
final class ShardedCounter: MetricChild {
    private let shards = Mutex<[Int: Counter]>([:])

    /// The shard's counter, created on first use.
    func shard(_ index: Int) -> Counter {
        shards.withLock { shards in
            if let existing = shards[index] { return existing }
            let created = Counter()
            shards[index] = created
            return created
        }
    }

    func render(name: String, labels: [(String, String)], into out: inout String) {
        let total = shards.withLock { $0.values.reduce(0) { $0 + $1.current } }
        out += "\(name)\(MetricFamily.labelText(labels)) \(total)\n"
    }
}

/// A histogram kept as one `Histogram` per writer (shard) and rendered as their sum.
final class ShardedHistogram: MetricChild {
    private let bounds: [Double]
    private let shards = Mutex<[Int: Histogram]>([:])

    init(buckets: [Double]) {
        bounds = buckets.sorted()
    }

    /// The shard's histogram, created on first use.
    func shard(_ index: Int) -> Histogram {
        shards.withLock { shards in
            if let existing = shards[index] { return existing }
            let created = Histogram(buckets: bounds)
            shards[index] = created
            return created
        }
    }

    func render(name: String, labels: [(String, String)], into out: inout String) {
        let parts = shards.withLock { Array($0.values) }
        var total = Histogram.Snapshot(counts: Array(repeating: 0, count: bounds.count), sum: 0, count: 0)
        for part in parts {
            let snapshot = part.snapshot()
            for index in total.counts.indices { total.counts[index] += snapshot.counts[index] }
            total.sum += snapshot.sum
            total.count += snapshot.count
        }
        Histogram.render(total, bounds: bounds, name: name, labels: labels, into: &out)
    }
}
