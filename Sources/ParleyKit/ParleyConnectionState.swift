/// The client's connection as the app sees it.
public enum ParleyConnectionState: Sendable, Equatable {
    /// Not started.
    case idle
    /// Opening the socket or waiting for `welcome`.
    case connecting
    /// The session is open; `userId` is the logged-in user.
    case connected(userId: String)
    /// The connection dropped; the next attempt starts after this many milliseconds.
    case waitingToReconnect(afterMilliseconds: Int64)
    /// Stopped by the app (nil) or by the server for good (`invalidSession`, `replaced`, …).
    case stopped(ParleyError?)
}
