/// A value owned by one event loop that can be passed around as `Sendable`.
///
/// Every access checks that it happens on the owning loop's thread, so the value itself never
/// crosses threads (the same contract as swift-nio's `NIOLoopBound`).
public struct LoopBound<Value>: @unchecked Sendable {
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private let box: Box
    /// The loop that owns the value.
    public let loop: EventLoop

    /// Wraps `value`; must be called on `loop`.
    public init(_ value: Value, loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.box = Box(value)
        self.loop = loop
    }

    /// The value; reading or writing it off the owning loop traps.
    public var value: Value {
        get {
            loop.preconditionInEventLoop()
            return box.value
        }
        nonmutating set {
            loop.preconditionInEventLoop()
            box.value = newValue
        }
    }
}
