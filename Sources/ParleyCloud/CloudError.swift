import ParleyHTTP
import ParleyPostgres

/// Why a Cloud Code operation failed; `ParleyParse` maps it to Parse's code and message once.
public enum CloudError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 143 `invalid hook declaration`: a missing field or an unknown trigger name.
    case invalidHook
    /// 143: a hook URL Parley cannot call (only `http://` until the TLS client exists).
    case unsupportedURL(String)
    /// 143 `function name: NAME already exits` (Parse's spelling).
    case functionExists(String)
    /// 143 `class C already has trigger T`.
    case triggerExists(className: String, trigger: String)
    /// 143 `no function named: NAME is defined`.
    case noSuchFunctionHook(String)
    /// 143 `class C does not exist` (no such trigger hook).
    case noSuchTriggerHook(className: String)
    /// 143: the app already has `HookStore.maxHooks` hooks.
    case tooManyHooks(Int)
    /// 141 `Invalid function: "NAME"`: `POST /functions/NAME` with no such function.
    case invalidFunction(String)
    /// 141 `Invalid job: NAME`.
    case invalidJob(String)
    /// 141 with the webhook's own message (`{"error": …}`).
    case scriptFailed(String)
    /// 141: the webhook could not be called or gave no usable answer.
    case webhookFailed(WebhookFailure)
    /// Internal: the hooks table could not be read or written.
    case database(PostgresError)

    /// Parse's error code.
    public var code: Int {
        switch self {
        case .invalidHook, .unsupportedURL, .functionExists, .triggerExists, .noSuchFunctionHook, .noSuchTriggerHook, .tooManyHooks: 143
        case .invalidFunction, .invalidJob, .scriptFailed, .webhookFailed: 141
        case .database: 1
        }
    }

    /// The client's message.
    public var message: String {
        switch self {
        case .invalidHook: "invalid hook declaration"
        case .unsupportedURL(let url): "invalid hook declaration: \(url) is not an http:// or https:// URL"
        case .functionExists(let name): "function name: \(name) already exits"
        case .triggerExists(let className, let trigger): "class \(className) already has trigger \(trigger)"
        case .noSuchFunctionHook(let name): "no function named: \(name) is defined"
        case .noSuchTriggerHook(let className): "class \(className) does not exist"
        case .tooManyHooks(let limit): "too many hooks: at most \(limit) functions and triggers"
        case .invalidFunction(let name): "Invalid function: \"\(name)\""
        case .invalidJob(let name): "Invalid job: \(name)"
        case .scriptFailed(let message): message
        case .webhookFailed(let failure): failure.description
        case .database(let error): "\(error)"
        }
    }

    public var description: String { "CloudError \(code): \(message)" }
}

/// Why a webhook call produced no answer Parley can use.
public enum WebhookFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// No answer within the deadline.
    case timedOut
    /// The connection could not be made (refused, unreachable, unresolved host).
    case unreachable(String)
    /// The answer was larger than the limit, or broke HTTP.
    case badResponse(String)
    /// Too many calls already wait for this webhook (the bounded queue is full).
    case overloaded
    /// The body was not JSON, or had neither `success` nor `error` (`Malformed response`, as Parse).
    case malformed
    /// A non-2xx status without a JSON `error`.
    case status(Int)

    init(_ error: HTTPClientError) {
        switch error {
        case .timedOut: self = .timedOut
        case .unresolvedHost, .connectFailed, .tls: self = .unreachable("\(error)")
        case .invalidResponse(.bodyTooLarge): self = .badResponse("the webhook's answer is larger than the limit")
        case .invalidResponse, .connectionClosed: self = .badResponse("\(error)")
        case .tooManyQueuedRequests: self = .overloaded
        case .requestTooLarge: self = .badResponse("the webhook request is larger than the limit")
        case .shutDown: self = .unreachable("the server is shutting down")
        }
    }

    public var description: String {
        switch self {
        case .timedOut: "Webhook timed out."
        case .unreachable(let detail): "Webhook unreachable: \(detail)"
        case .badResponse(let detail): "Webhook answer refused: \(detail)"
        case .overloaded: "Webhook overloaded: too many calls are waiting for it."
        case .malformed: "Malformed response"
        case .status(let code): "Webhook answered HTTP \(code)."
        }
    }
}
