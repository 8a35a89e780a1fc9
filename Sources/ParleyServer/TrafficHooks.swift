import ParleyCalls
import ParleyCloud
import ParleyJSON
import ParleyLog
import ParleyRealtime

/// Wires Cloud Code's traffic webhooks and the block list into messaging and calls
/// (docs/cloud-code.md, "Hooks on messages and calls"): the webhook payloads and how their
/// answers become verdicts. With no traffic hook registered and the hook table cached, nothing
/// here reads the database or starts a task.
struct TrafficHooks: MessageHooks, CallHooks {
    let traffic: TrafficWebhooks
    let blocks: BlockList

    // MARK: Messages

    func registeredFromMemory() -> MessageHookSet? {
        guard let before = traffic.urlFromMemory(.beforeMessage), let after = traffic.urlFromMemory(.afterMessage) else { return nil }
        return MessageHookSet(before: before != nil, after: after != nil)
    }

    func registered() async -> MessageHookSet {
        do throws(CloudError) {
            return MessageHookSet(before: try await traffic.url(.beforeMessage) != nil, after: try await traffic.url(.afterMessage) != nil)
        } catch {
            // The table cannot be read: beforeMessage applies its failure rule, afterMessage is tried.
            return MessageHookSet(before: true, after: true)
        }
    }

    func beforeMessage(_ message: OutgoingMessage) async -> MessageVerdict {
        let url: String
        do throws(CloudError) {
            guard let found = try await traffic.url(.beforeMessage) else { return .accept }
            url = found
        } catch {
            return failed(error.message)
        }
        var object: JSONObject = [
            "className": .string(TriggerName.messageClass), "from": .string(message.from),
            "to": .array(message.request.to.map { .string($0) }), "text": .string(message.request.text),
            "headers": Self.headers(message.request.headersJSON), "clientMessageId": .string(message.request.clientMessageId),
        ]
        object["deviceId"] = message.deviceId.map { .string($0) } ?? .null
        switch await traffic.review(url, body: ["triggerName": .string(TriggerName.beforeMessage.rawValue), "object": .object(object)]) {
        case .accept(.object(let rewrite)) where rewrite["text"] != nil || rewrite["headers"] != nil:
            guard let text = rewrite["text"]?.string ?? (rewrite["text"] == nil ? message.request.text : nil) else {
                return .refuse(RealtimeFailure(.hookFailed, "the beforeMessage hook's rewrite is refused: \"text\" must be a string"))
            }
            switch rewrite["headers"] {
            case nil: return .rewrite(text: text, headers: nil)
            case .object(let headers)?: return .rewrite(text: text, headers: headers)
            default: return .refuse(RealtimeFailure(.hookFailed, "the beforeMessage hook's rewrite is refused: \"headers\" must be an object"))
            }
        case .accept:
            return .accept
        case .reject(let reason):
            return .refuse(RealtimeFailure(.rejected, reason))
        case .failed(let reason):
            return failed(reason)
        }
    }

    private func failed(_ reason: String) -> MessageVerdict {
        traffic.failOpen ? .accept : .refuse(RealtimeFailure(.hookFailed, "beforeMessage hook failed: \(reason)"))
    }

    func afterMessage(_ message: MessageRecord) async {
        guard let url = try? await traffic.url(.afterMessage) else { return }
        let object: JSONObject = [
            "className": .string(TriggerName.messageClass), "messageId": .string(message.id), "from": .string(message.from),
            "to": .array(message.to.map { .string($0) }), "text": .string(message.text), "headers": Self.headers(message.headersJSON),
            "sentAt": .string(UTCTime.iso8601(milliseconds: message.sentAt)),
        ]
        await traffic.deliver(url, body: ["triggerName": .string(TriggerName.afterMessage.rawValue), "object": .object(object)])
    }

    static func headers(_ json: String) -> JSONValue {
        if case .object(let headers)? = try? JSONParser().parse(json) { return .object(headers) }
        return .object([:])
    }

    // MARK: Calls

    func mustReview(caller: String, callee: String) -> Bool {
        guard let blockers = blocks.cachedBlockers(of: caller), !blockers.contains(callee),
              let url = traffic.urlFromMemory(.beforeCall) else { return true }
        return url != nil
    }

    /// A callee who blocked the caller: `denied` without a reason (as a decline). Then `beforeCall`.
    func review(_ invite: CallInviteReview) async -> CallRefusal? {
        do throws(RealtimeFailure) {
            if try await blocks.blockers(of: invite.caller.userId).contains(invite.calleeId) { return CallRefusal(cause: .denied, error: nil) }
        } catch {
            return CallRefusal(cause: .failure, error: "unavailable")
        }
        let url: String
        do throws(CloudError) {
            guard let found = try await traffic.url(.beforeCall) else { return nil }
            url = found
        } catch {
            return failedCall(error.message)
        }
        let object: JSONObject = [
            "className": .string(TriggerName.callClass), "callId": .string(invite.callId), "from": .string(invite.caller.userId),
            "to": .string(invite.calleeId), "video": .bool(invite.video), "headers": .object(invite.headers),
        ]
        switch await traffic.review(url, body: ["triggerName": .string(TriggerName.beforeCall.rawValue), "object": .object(object)]) {
        case .accept: return nil
        case .reject(let reason): return CallRefusal(cause: .denied, error: reason)
        case .failed(let reason): return failedCall(reason)
        }
    }

    private func failedCall(_ reason: String) -> CallRefusal? {
        traffic.failOpen ? nil : CallRefusal(cause: .failure, error: "hook_failed: \(reason)")
    }

    func callEnded(_ details: JSONObject) {
        if case .some(.none) = traffic.urlFromMemory(.afterCallEnded) { return }
        var object = details
        object["className"] = .string(TriggerName.callClass)
        let body: JSONObject = ["triggerName": .string(TriggerName.afterCallEnded.rawValue), "object": .object(object)]
        Task { [traffic] in
            guard let url = try? await traffic.url(.afterCallEnded) else { return }
            await traffic.deliver(url, body: body)
        }
    }
}
