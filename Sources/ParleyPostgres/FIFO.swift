/// A first-in first-out queue on an array with a moving head (amortised O(1) at both ends).
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ element: Element) { storage.append(element) }

    mutating func popFirst() -> Element? {
        guard !isEmpty else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Removes and returns everything, oldest first.
    mutating func removeAll() -> [Element] {
        let all = Array(storage[head...])
        storage.removeAll()
        head = 0
        return all
    }

    /// Removes the elements matching `predicate` and returns them, oldest first.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        var kept: [Element] = []
        var removed: [Element] = []
        for element in storage[head...] {
            if predicate(element) { removed.append(element) } else { kept.append(element) }
        }
        storage = kept
        head = 0
        return removed
    }
}
