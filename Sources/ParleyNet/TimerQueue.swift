/// Identifies a timer scheduled on an `EventLoop`.
public struct TimerID: Hashable, Sendable {
    let value: UInt64
}

/// A min-heap of deadlines with lazy cancellation; owned by one loop.
struct TimerQueue {
    private var heap: [(deadline: UInt64, id: UInt64)] = []
    private var actions: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 1
    /// Heap entries whose timer was cancelled: while there are none, the top is live without a
    /// dictionary lookup (the loop asks for the next deadline on every turn).
    private var cancelledInHeap = 0

    var isEmpty: Bool { actions.isEmpty }
    var count: Int { actions.count }

    mutating func schedule(deadline: UInt64, _ action: @escaping () -> Void) -> TimerID {
        let id = nextID
        nextID &+= 1
        actions[id] = action
        heap.append((deadline, id))
        siftUp(heap.count - 1)
        return TimerID(value: id)
    }

    mutating func cancel(_ timer: TimerID) {
        if actions.removeValue(forKey: timer.value) != nil { cancelledInHeap += 1 }
        if actions.isEmpty {
            heap.removeAll(keepingCapacity: true)
            cancelledInHeap = 0
        }
    }

    /// The earliest live deadline, dropping cancelled entries on the way.
    mutating func nextDeadline() -> UInt64? {
        while let top = heap.first {
            if cancelledInHeap == 0 || actions[top.id] != nil { return top.deadline }
            popTop()
            cancelledInHeap -= 1
        }
        return nil
    }

    /// Removes and returns the actions whose deadline is at or before `now`, earliest first.
    mutating func popExpired(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while let top = heap.first, top.deadline <= now {
            popTop()
            if let action = actions.removeValue(forKey: top.id) {
                due.append(action)
            } else {
                cancelledInHeap -= 1
            }
        }
        return due
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
