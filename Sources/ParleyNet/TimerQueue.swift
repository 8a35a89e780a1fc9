/// Identifies a timer scheduled on an `EventLoop`.
public struct TimerID: Hashable, Sendable {
    /// The timer's slot in the low 32 bits, the slot's generation for this timer in the high 32.
    let value: UInt64
}

/// A min-heap of deadlines with lazy cancellation; owned by one loop.
///
/// Actions are kept in reusable slots and an ID names its slot and the slot's generation, so
/// whether a heap entry is still live (asked on every loop turn) is an array read, not a hash
/// lookup. A cancelled or fired timer's slot is reused at once: its old heap entry, if any, no
/// longer matches the slot's generation.
struct TimerQueue {
    private struct Slot {
        var generation: UInt32 = 0
        var action: (() -> Void)?
    }

    private var heap: [(deadline: UInt64, id: TimerID)] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// Timers scheduled and neither fired nor cancelled.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func schedule(deadline: UInt64, _ action: @escaping () -> Void) -> TimerID {
        let index: Int
        if let free = freeSlots.popLast() {
            index = free
        } else {
            index = slots.count
            slots.append(Slot())
        }
        slots[index].generation &+= 1
        slots[index].action = action
        count += 1
        let id = TimerID(value: UInt64(slots[index].generation) << 32 | UInt64(index))
        heap.append((deadline, id))
        siftUp(heap.count - 1)
        return id
    }

    mutating func cancel(_ timer: TimerID) {
        guard take(timer) != nil else { return }
        if count == 0 { heap.removeAll(keepingCapacity: true) }
    }

    /// The earliest live deadline, dropping cancelled entries on the way.
    mutating func nextDeadline() -> UInt64? {
        while let top = heap.first {
            if slot(of: top.id) != nil { return top.deadline }
            popTop()
        }
        return nil
    }

    /// Removes and returns the actions whose deadline is at or before `now`, earliest first.
    mutating func popExpired(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while let top = heap.first, top.deadline <= now {
            popTop()
            if let action = take(top.id) { due.append(action) }
        }
        return due
    }

    /// The slot of a timer that is still scheduled, or nil.
    private func slot(of timer: TimerID) -> Int? {
        let index = Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: timer.value))
        guard index < slots.count, slots[index].generation == UInt32(truncatingIfNeeded: timer.value >> 32),
              slots[index].action != nil else { return nil }
        return index
    }

    /// Removes a scheduled timer's action and frees its slot; nil when it is not scheduled.
    private mutating func take(_ timer: TimerID) -> (() -> Void)? {
        guard let index = slot(of: timer) else { return nil }
        let action = slots[index].action
        slots[index].action = nil
        freeSlots.append(index)
        count -= 1
        return action
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
