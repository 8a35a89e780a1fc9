import Synchronization

/// A monotonically increasing count.
public final class Counter: MetricChild {
    private let value = Atomic<Int>(0)

    init() {}

    public func increment(by amount: Int = 1) {
        value.add(amount, ordering: .relaxed)
    }

    public var current: Int { value.load(ordering: .relaxed) }

    func render(name: String, labels: [(String, String)], into out: inout String) {
        out += "\(name)\(MetricFamily.labelText(labels)) \(current)\n"
    }
}

/// A value that goes up and down.
public final class Gauge: MetricChild {
    private let value = Atomic<Int>(0)

    init() {}

    public func set(_ newValue: Int) { value.store(newValue, ordering: .relaxed) }
    public func increment(by amount: Int = 1) { value.add(amount, ordering: .relaxed) }
    public func decrement(by amount: Int = 1) { value.subtract(amount, ordering: .relaxed) }
    public var current: Int { value.load(ordering: .relaxed) }

    func render(name: String, labels: [(String, String)], into out: inout String) {
        out += "\(name)\(MetricFamily.labelText(labels)) \(current)\n"
    }
}
