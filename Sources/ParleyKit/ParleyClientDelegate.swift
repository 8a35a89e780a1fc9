import ParleyJSON

/// Told what arrives, in order, from the SDK's delivery task. An event counts as processed
/// (and is acknowledged, in batches) only once its method returned: store the message before
/// returning. A crash before that delivers it again (at-least-once); the SDK's dedupe makes
/// the app see each event once otherwise.
public protocol ParleyClientDelegate: AnyObject, Sendable {
    func parleyClient(_ client: ParleyClient, didReceive message: ChatMessage) async
    func parleyClient(_ client: ParleyClient, didReceive receipt: Receipt) async
    func parleyClient(_ client: ParleyClient, didReceivePresence presence: Presence) async
    func parleyClient(_ client: ParleyClient, didReceiveTyping typing: TypingIndicator) async
    /// A queued or live event type this SDK does not know.
    func parleyClient(_ client: ParleyClient, didReceiveEvent type: String, fields: JSONObject) async
    /// A send finished: stored by the server, or refused for good.
    func parleyClient(_ client: ParleyClient, didSend clientMessageId: String, result: Result<SentMessage, ParleyError>) async
    func parleyClient(_ client: ParleyClient, didChangeConnectionState state: ParleyConnectionState) async
    /// Events were lost to retention while the device was away: reload history.
    func parleyClientDidDetectGap(_ client: ParleyClient) async
    /// A call arrived over the socket (not one the app reported from a VoIP push).
    func parleyClient(_ client: ParleyClient, didReceiveIncomingCall call: Call) async
}

extension ParleyClientDelegate {
    public func parleyClient(_ client: ParleyClient, didReceive message: ChatMessage) async {}
    public func parleyClient(_ client: ParleyClient, didReceive receipt: Receipt) async {}
    public func parleyClient(_ client: ParleyClient, didReceivePresence presence: Presence) async {}
    public func parleyClient(_ client: ParleyClient, didReceiveTyping typing: TypingIndicator) async {}
    public func parleyClient(_ client: ParleyClient, didReceiveEvent type: String, fields: JSONObject) async {}
    public func parleyClient(_ client: ParleyClient, didSend clientMessageId: String, result: Result<SentMessage, ParleyError>) async {}
    public func parleyClient(_ client: ParleyClient, didChangeConnectionState state: ParleyConnectionState) async {}
    public func parleyClientDidDetectGap(_ client: ParleyClient) async {}
    public func parleyClient(_ client: ParleyClient, didReceiveIncomingCall call: Call) async {}
}
