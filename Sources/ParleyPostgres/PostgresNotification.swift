/// A NOTIFY received on a LISTENing connection.
public struct PostgresNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
    /// Process id of the notifying backend.
    public var processID: Int32

    public init(channel: String, payload: String, processID: Int32) {
        self.channel = channel
        self.payload = payload
        self.processID = processID
    }
}
