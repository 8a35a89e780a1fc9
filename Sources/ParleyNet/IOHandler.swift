/// Which readiness events a registered file descriptor is interested in.
public struct IOInterest: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let readable = IOInterest(rawValue: 1)
    public static let writable = IOInterest(rawValue: 2)
    public static let none: IOInterest = []
}

/// Receives readiness events for a file descriptor registered with an `EventLoop`.
///
/// Hang-ups and errors are reported as readable, so that the next `read` sees them.
public protocol IOHandler: AnyObject {
    func handleReadable()
    func handleWritable()
}
