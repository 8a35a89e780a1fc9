import ParleyJSON
import ParleyLog
import ParleyPostgres

/// The webhooks on Parley's own traffic (`beforeMessage`, `afterMessage`, `beforeCall`,
/// `afterCallEnded`, registered as triggers on `_Message` and `_Call`): looked up in the cached
/// hook table, called with the traffic deadline, after-hooks queued as durable deliveries.
public struct TrafficWebhooks: Sendable {
    /// What a before-hook said.
    public enum Verdict: Sendable, Equatable {
        /// `{"success": X}`: X (JSON null when none).
        case accept(JSONValue)
        /// `{"error": …}`: its message.
        case reject(String)
        /// No usable answer (timeout, unreachable, bad answer), or the hook table could not be read.
        case failed(String)
    }

    let hooks: HookStore
    let caller: WebhookCaller
    let deliveries: DeliveryStore
    let worker: CloudWorker
    /// Whether a failed before-hook lets the traffic through (`--webhook-traffic-fail-open`).
    public let failOpen: Bool
    let logger: Logger

    /// The URL of `trigger`, when the hook table is cached: `.some(nil)` means none is registered;
    /// nil means a read is needed.
    public func urlFromMemory(_ trigger: TriggerName) -> String?? {
        guard let table = hooks.cachedTable(), let className = trigger.requiredClassName else { return nil }
        return .some(table.triggers.isEmpty ? nil : table.url(of: trigger, on: className))
    }

    /// The URL of `trigger` (reads the hook table when not cached).
    public func url(_ trigger: TriggerName) async throws(CloudError) -> String? {
        if let known = urlFromMemory(trigger) { return known }
        guard let className = trigger.requiredClassName else { return nil }
        return try await hooks.table().url(of: trigger, on: className)
    }

    /// Calls a before-hook at `url` with `body` (the traffic deadline applies).
    public func review(_ url: String, body: JSONObject) async -> Verdict {
        do {
            return .accept(try await caller.call(url, body: body))
        } catch {
            if case .scriptFailed(let message) = error { return .reject(message) }
            logger.warning("traffic webhook failed", [("url", url), ("error", error.message)])
            return .failed(error.message)
        }
    }

    /// Queues an after-hook call, delivered at least once by the Cloud Code worker (the same
    /// rows, retries and dead state as afterSave). Retried a few times; logged when it cannot be queued.
    public func deliver(_ url: String, body: JSONObject) async {
        for attempt in 1...3 {
            do {
                try await deliveries.enqueue(url: url, body: body)
                worker.wake()
                return
            } catch {
                guard attempt < 3 else {
                    logger.error("queueing a traffic webhook delivery failed; it is lost", [("url", url), ("error", "\(error)")])
                    return
                }
            }
        }
    }
}
