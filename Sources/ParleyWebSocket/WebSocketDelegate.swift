/// The application side of a WebSocket; called on the connection's loop thread.
public protocol WebSocketDelegate: AnyObject {
    /// The handler is installed; called before any message (keep `socket` to send later).
    func webSocketDidOpen(_ socket: WebSocketHandler)
    /// A complete text message (valid UTF-8).
    func webSocket(_ socket: WebSocketHandler, didReceiveText text: String)
    /// A complete binary message.
    func webSocket(_ socket: WebSocketHandler, didReceiveBinary bytes: [UInt8])
    /// Everything queued was written; `pendingOutboundBytes` is zero again.
    func webSocketDidDrain(_ socket: WebSocketHandler)
    /// A pong arrived (the answer to a ping this side sent).
    func webSocketDidReceivePong(_ socket: WebSocketHandler)
    /// The connection closed; called exactly once. `code` is the peer's close code (1005 if its
    /// close frame had none); else 1006 if we dropped the peer (no pong, outbound buffer full,
    /// close timeout; the reason says which); else the code we sent on a protocol error; else 1006.
    func webSocket(_ socket: WebSocketHandler, didClose code: WebSocketCloseCode, reason: String)
}

extension WebSocketDelegate {
    public func webSocketDidOpen(_ socket: WebSocketHandler) {}
    public func webSocketDidDrain(_ socket: WebSocketHandler) {}
    public func webSocketDidReceivePong(_ socket: WebSocketHandler) {}
    /// By default binary messages are refused with 1003 (unsupported data).
    public func webSocket(_ socket: WebSocketHandler, didReceiveBinary bytes: [UInt8]) {
        socket.close(code: .unsupportedData, reason: "binary messages not accepted")
    }
}
