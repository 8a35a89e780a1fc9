import ParleyJSON
import ParleyLog

/// A call as stored and listed: who, what, and its details.
public struct CallRecord: Sendable, Equatable {
    /// As the caller spelled it (a UUID; compared without regard to case).
    public var callId: String
    public var caller: CallDevice
    public var calleeId: String
    /// The callee device that answered, once one did.
    public var answerDevice: String?
    /// The invite's headers, as the caller sent them.
    public var headers: JSONObject
    public var state: CallState
    public var details: CallDetails

    public init(callId: String, caller: CallDevice, calleeId: String, answerDevice: String?, headers: JSONObject, state: CallState, details: CallDetails) {
        self.callId = callId
        self.caller = caller
        self.calleeId = calleeId
        self.answerDevice = answerDevice
        self.headers = headers
        self.state = state
        self.details = details
    }

    /// The snapshot of a live call.
    public init(_ machine: CallStateMachine, headers: JSONObject) {
        self.init(callId: machine.callId, caller: machine.caller, calleeId: machine.calleeId, answerDevice: machine.answerer?.deviceId,
                  headers: headers, state: machine.state, details: machine.details)
    }

    /// The details object of `call.ended` and of `GET /v1/calls` items; the answering device
    /// appears as its opaque label (`CallTransport.label(of:)`), never as its id.
    public func json(deviceLabel: (CallDevice) -> String) -> JSONValue {
        func time(_ milliseconds: Int64?) -> JSONValue {
            milliseconds.map { .string(UTCTime.iso8601(milliseconds: $0)) } ?? .null
        }
        func number(_ value: Int64?) -> JSONValue {
            value.map { .int($0) } ?? .null
        }
        return [
            "callId": .string(callId),
            "from": .string(caller.userId),
            "to": .string(calleeId),
            "video": .bool(details.video),
            "headers": .object(headers),
            "state": .string(state.rawValue),
            "answeredDeviceId": answerDevice.map { .string(deviceLabel(CallDevice(userId: calleeId, deviceId: $0))) } ?? .null,
            "startedAt": time(details.startedAt),
            "progressedAt": time(details.progressedAt),
            "rungAt": time(details.rungAt),
            "answeredAt": time(details.answeredAt),
            "establishedAt": time(details.establishedAt),
            "endedAt": time(details.endedAt),
            "endCause": details.endCause.map { .string($0.rawValue) } ?? .null,
            "error": details.error.map { .string($0) } ?? .null,
            "duration": number(details.duration),
            "setupDuration": number(details.setupDuration),
            "notifyingDuration": number(details.notifyingDuration),
            "ringingDuration": number(details.ringingDuration),
        ]
    }
}
