/// Receives a connection's events on its loop thread (a protocol codec implements this).
public protocol ConnectionHandler: AnyObject {
    /// Bytes arrived; the buffer is valid only during the call.
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer)
    /// Everything queued was written (the outbound buffer is empty again).
    func connectionDidDrain(_ connection: Connection)
    /// The peer finished sending (half close). The default closes once output is flushed.
    func connectionDidReceiveEOF(_ connection: Connection)
    /// The connection closed (peer, error or `close`); called exactly once, after the current callback.
    func connectionDidClose(_ connection: Connection)
    /// The server is shutting down: finish in-flight work, then close.
    func connectionShouldQuiesce(_ connection: Connection)
}

extension ConnectionHandler {
    public func connectionDidDrain(_ connection: Connection) {}
    public func connectionDidReceiveEOF(_ connection: Connection) { connection.close() }
    public func connectionShouldQuiesce(_ connection: Connection) { connection.close() }
}
