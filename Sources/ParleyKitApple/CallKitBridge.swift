// iOS (and Mac Catalyst) only; nothing on Linux. Not compiled on this project's machines:
// see docs/sdk-swift.md, "What is tested where".
#if canImport(Darwin)
#if canImport(CallKit) && os(iOS)
import AVFAudio
@preconcurrency import CallKit
import Foundation
import ParleyKit

/// The glue between CallKit and ParleyKit (what a Sinch app's client mediator and
/// `CXProviderDelegate` did): reports calls to the system UI, performs its answer and end
/// actions on the `Call`, and reports the call's progress and end back.
///
/// `answerSDP` asks the app's WebRTC stack for the answer to an incoming call's offer.
public final class ParleyCallKitBridge: NSObject, CXProviderDelegate, @unchecked Sendable {
    public let provider: CXProvider
    public let callController = CXCallController()
    public let client: ParleyClient
    private let answerSDP: @Sendable (Call, String) async throws -> String
    /// Told when CallKit activates or deactivates the audio session (start/stop WebRTC audio there).
    public var audioSessionActivated: (@Sendable (Bool) -> Void)?

    public init(client: ParleyClient, configuration: CXProviderConfiguration,
                answerSDP: @escaping @Sendable (Call, String) async throws -> String) {
        self.client = client
        self.answerSDP = answerSDP
        provider = CXProvider(configuration: configuration)
        super.init()
        provider.setDelegate(self, queue: nil)
    }

    /// From `pushRegistry(_:didReceiveIncomingPushWith:for:completion:)`: reports the call
    /// before returning, as iOS requires. Call `client.connect(sessionToken:)` after it; the
    /// replay completes the call.
    @discardableResult
    public func reportIncomingCall(fromPush dictionaryPayload: [AnyHashable: Any], completion: @escaping @Sendable () -> Void) -> Call? {
        guard let payload = VoIPPushPayload(dictionaryPayload: dictionaryPayload) else {
            completion()
            return nil
        }
        let call = client.incomingCall(fromPush: payload)
        report(call, callerName: payload.callerName, completion: completion)
        return call
    }

    /// Reports a call that arrived over the socket (`didReceiveIncomingCall`).
    public func reportIncomingCall(_ call: Call) {
        report(call, callerName: call.callerName, completion: {})
    }

    /// Starts an outgoing call and tells CallKit about it.
    public func startCall(to userId: String, displayName: String? = nil, video: Bool = false) async throws -> Call {
        let call = try await client.callUser(withId: userId, video: video)
        let handle = CXHandle(type: .generic, value: userId)
        let action = CXStartCallAction(call: call.uuid.foundationUUID, handle: handle)
        action.isVideo = video
        action.contactIdentifier = displayName
        try await callController.request(CXTransaction(action: action))
        observe(call)
        return call
    }

    private func report(_ call: Call, callerName: String?, completion: @escaping @Sendable () -> Void) {
        let update = CXCallUpdate()
        update.remoteHandle = CXHandle(type: .generic, value: call.remoteUserId)
        update.localizedCallerName = callerName
        update.hasVideo = call.video
        provider.reportNewIncomingCall(with: call.uuid.foundationUUID, update: update) { error in
            if error != nil { Task { try? await call.decline() } }
            completion()
        }
        observe(call)
    }

    private func observe(_ call: Call) {
        let provider = self.provider
        let uuid = call.uuid.foundationUUID
        Task {
            for await event in call.events {
                switch event {
                case .stateChanged(.progressing) where call.direction == .outgoing:
                    provider.reportOutgoingCall(with: uuid, startedConnectingAt: nil)
                case .stateChanged(.answered) where call.direction == .outgoing:
                    provider.reportOutgoingCall(with: uuid, connectedAt: nil)
                case .ended(let cause, _, _):
                    provider.reportCall(with: uuid, endedAt: nil, reason: Self.reason(for: cause, direction: call.direction))
                default:
                    break
                }
            }
        }
    }

    /// How an end cause reads in the system UI.
    static func reason(for cause: CallEndCause, direction: CallDirection) -> CXCallEndedReason {
        switch cause {
        case .otherDeviceAnswered: .answeredElsewhere
        case .denied, .busy: direction == .incoming ? .declinedElsewhere : .remoteEnded
        case .noAnswer, .timeout: .unanswered
        case .failure, .inactive: .failed
        case .canceled, .hungUp: .remoteEnded
        }
    }

    // MARK: CXProviderDelegate

    public func providerDidReset(_ provider: CXProvider) {
        for call in client.calls.liveCalls { Task { try? await call.hangup() } }
    }

    public func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
        action.fulfill()
    }

    public func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
        guard let call = client.calls.call(uuid: ParleyUUID(action.callUUID)) else { return action.fail() }
        let answerSDP = self.answerSDP
        Task {
            do {
                let offer = try await call.remoteOfferSDP()
                try await call.answer(sdp: try await answerSDP(call, offer))
                action.fulfill()
            } catch {
                action.fail()
            }
        }
    }

    public func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
        guard let call = client.calls.call(uuid: ParleyUUID(action.callUUID)) else { return action.fulfill() }
        Task {
            try? await call.hangup()
            action.fulfill()
        }
    }

    public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
        audioSessionActivated?(true)
    }

    public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
        audioSessionActivated?(false)
    }
}
#endif
#endif
