/// One device of one user: who sends a call frame, or where a call event goes.
public struct CallDevice: Sendable, Hashable, CustomStringConvertible {
    /// The `_User` objectId.
    public var userId: String
    /// The device id, scoped to `userId`.
    public var deviceId: String

    public init(userId: String, deviceId: String) {
        self.userId = userId
        self.deviceId = deviceId
    }

    public var description: String { "\(userId)/\(deviceId)" }
}

/// The two sides of a call.
public enum CallSide: String, Sendable, Hashable, CaseIterable {
    case caller
    case callee
}
