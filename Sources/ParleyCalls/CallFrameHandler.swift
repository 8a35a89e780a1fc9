import ParleyJSON
import ParleyRealtime

/// Plugs the call service into `/v1/socket`: `call.*` frames of open sessions, and closed
/// connections. Register with `RealtimeService.register(handler:forTypePrefix: "call.")`.
/// Invites count against the user's send rate limit (the one messages use).
public struct CallFrameHandler: RealtimeFrameHandler {
    /// The frame type prefix to register it for.
    public static let prefix = "call."

    let calls: CallService
    let realtime: RealtimeService

    public init(calls: CallService, realtime: RealtimeService) {
        self.calls = calls
        self.realtime = realtime
    }

    public func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey) async throws(RealtimeFailure) -> [(String, JSONValue)] {
        let result = await withCheckedContinuation { continuation in
            handle(type: type, frame: frame, from: connection, device: device) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Without a task: the call service answers from the call's loop.
    public func handle(type: String, frame: JSONObject, from connection: RealtimeConnection, device: DeviceKey,
                       reply: @escaping @Sendable (Result<[(String, JSONValue)], RealtimeFailure>) -> Void) {
        if type == "call.invite" {
            let configuration = realtime.configuration
            guard realtime.registry.takeSendTokens(device.userId, count: 1, rate: configuration.sendRatePerSecond, burst: configuration.sendBurst) else {
                return reply(.failure(RealtimeFailure(.rateLimited, "calling too fast; slow down")))
            }
        }
        calls.handle(type: type, object: frame, from: CallDevice(device)) { result in
            switch result {
            case .success(let fields):
                reply(.success(fields.map { ($0.key, $0.value) }))
            case .failure(let error):
                reply(.failure(RealtimeFailure(error.realtimeCode, error.description)))
            }
        }
    }

    public func connectionOpened(_ connection: RealtimeConnection, device: DeviceKey) {
        calls.deviceConnected(CallDevice(device))
    }

    public func connectionClosed(_ connection: RealtimeConnection, device: DeviceKey) {
        // A connection replaced by a newer one of the same device does not take the device away.
        if let current = realtime.registry.connection(for: device), current !== connection { return }
        calls.deviceDisconnected(CallDevice(device))
    }

    public func received(fromNode message: String) {
        guard let object = try? JSONParser().parse(message).object else { return }
        calls.received(fromNode: object)
    }
}

extension CallError {
    /// The realtime layer's code for this error (the same string as `code`).
    public var realtimeCode: RealtimeErrorCode {
        switch self {
        case .invalidRequest: .badRequest
        case .callNotFound: .callNotFound
        case .callExists: .callExists
        case .callEnded: .callEnded
        case .cannotCallSelf: .cannotCallSelf
        case .notCallee: .notCallee
        case .notParty: .notParty
        case .alreadyAnswered: .alreadyAnswered
        case .notAnswered: .notAnswered
        case .tooManyCalls: .tooManyCalls
        case .limitExceeded: .limitExceeded
        case .unavailable: .unavailable
        }
    }
}
