import Foundation
import ParleyJSON
import Synchronization

/// A gorush-compatible gateway for tests (`POST /api/push`, sync-mode answers): records every
/// notification, and can be told to fail, to hang up, to be slow, or to reject tokens.
final class GorushSink: Sendable {
    struct Received: Sendable {
        var notification: JSONObject
        /// Whether the gateway accepted it (request answered 200 and token not rejected).
        var accepted: Bool
        var at: Date

        var jobID: Int64? { notification["notif_id"]?.string.flatMap { Int64($0) } }
        var token: String? { notification["tokens"]?.array?.first?.string }
        var data: JSONObject { notification["data"]?.object ?? JSONObject() }
    }

    struct Behaviour: Sendable {
        /// Answer the next N requests with 500.
        var failNext = 0
        /// Answer every request with 500.
        var failAll = false
        /// Close the connection without answering.
        var hangUp = false
        var delay: Duration = .zero
        /// Tokens reported as failed-push with this error.
        var rejectTokens: [String: String] = [:]
    }

    private final class State: Sendable {
        let behaviour = Mutex(Behaviour())
        let received = Mutex<[Received]>([])
        let requests = Atomic<Int>(0)
    }

    private let state: State
    let server: ScriptedHTTPServer

    init() throws {
        let state = State()
        self.state = state
        server = try ScriptedHTTPServer { request in
            state.requests.add(1, ordering: .relaxed)
            let behaviour = state.behaviour.withLock { current -> Behaviour in
                let snapshot = current
                if current.failNext > 0 { current.failNext -= 1 }
                return snapshot
            }
            if behaviour.hangUp { return .hangUp }
            guard request.method == "POST", request.target == "/api/push",
                  case .object(let body)? = try? JSONParser().parse(request.body), let list = body["notifications"]?.array
            else {
                return .bytes(ScriptedHTTPServer.response(status: 400, body: "{\"code\":400,\"message\":\"Missing notifications field.\"}"), close: false)
            }
            let failing = behaviour.failAll || behaviour.failNext > 0
            var logs: [JSONValue] = []
            var received: [Received] = []
            for item in list {
                guard let notification = item.object else { continue }
                let token = notification["tokens"]?.array?.first?.string ?? ""
                let rejection = behaviour.rejectTokens[token]
                received.append(Received(notification: notification, accepted: !failing && rejection == nil, at: Date()))
                if let rejection {
                    logs.append(.object(["type": "failed-push", "platform": "ios", "token": .string(token),
                                         "message": .string(notification["message"]?.string ?? ""), "error": .string(rejection),
                                         "notif_id": .string(notification["notif_id"]?.string ?? "")]))
                }
            }
            state.received.withLock { $0 += received }
            let reply: ScriptedHTTPServer.Reply
            if failing {
                reply = .bytes(ScriptedHTTPServer.response(status: 500, body: "{\"error\":\"down\"}"), close: false)
            } else {
                let json = JSONValue.object(["success": "ok", "counts": .int(Int64(list.count)), "logs": .array(logs)]).serialized()
                reply = .bytes(ScriptedHTTPServer.response(headers: [("Content-Type", "application/json")], body: json), close: false)
            }
            return behaviour.delay > .zero ? .delayed(behaviour.delay, reply) : reply
        }
    }

    var url: String { "http://127.0.0.1:\(server.port)" }
    var received: [Received] { state.received.withLock { $0 } }
    var accepted: [Received] { received.filter(\.accepted) }
    var requestCount: Int { state.requests.load(ordering: .relaxed) }

    func configure(_ change: (inout Behaviour) -> Void) {
        state.behaviour.withLock { change(&$0) }
    }
}
