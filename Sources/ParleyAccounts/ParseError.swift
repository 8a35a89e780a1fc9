/// An error of the Parse-compatible API: a Parse error code and a message for the client.
///
/// Codes and messages follow Parse Server; `ParleyParse` maps them to HTTP statuses in one place.
public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1: anything unexpected (database down, bug). The detail is logged, never sent.
    case internalError(String)
    /// 101: no such object, or the caller may not see or change it; also bad credentials.
    case objectNotFound(String)
    /// 102
    case invalidQuery(String)
    /// 103
    case invalidClassName(String)
    /// 104
    case missingObjectId(String)
    /// 105
    case invalidKeyName(String)
    /// 106
    case invalidPointer(String)
    /// 107
    case invalidJSON(String)
    /// 108
    case commandUnavailable(String)
    /// 111
    case incorrectType(String)
    /// 115: a push the API cannot send as asked (Parse's PUSH_MISCONFIGURED).
    case pushMisconfigured(String)
    /// 116
    case objectTooLarge(String)
    /// 119
    case operationForbidden(String)
    /// 123
    case invalidACL(String)
    /// 125
    case invalidEmailAddress(String)
    /// 135
    case missingRequiredField(String)
    /// 137
    case duplicateValue(String)
    /// 141: Cloud Code failed (a webhook's error, or a webhook that could not be called).
    case scriptFailed(String)
    /// 142: a value broke a rule (the password policy).
    case validationFailed(String)
    /// 143: the Hooks API refused a declaration.
    case webhookError(String)
    /// 200
    case usernameMissing(String)
    /// 201
    case passwordMissing(String)
    /// 202
    case usernameTaken(String)
    /// 203
    case emailTaken(String)
    /// 204: an email request without an email.
    case emailMissing(String)
    /// 205: no user with that email, or an unverified email where one is required.
    case emailNotFound(String)
    /// 206
    case sessionMissing(String)
    /// 208: the authData is linked to another user.
    case accountAlreadyLinked(String)
    /// 209
    case invalidSessionToken(String)
    /// 252: an unknown or disabled authData provider.
    case unsupportedService(String)
    /// -1 (Parse's OTHER_CAUSE).
    case otherCause(String)
    /// 100 (Parse's CONNECTION_FAILED), HTTP 429: too many requests, retry later; what Parse
    /// Server's `rateLimit` answers ("Too many requests.").
    case tooManyRequests(String)

    /// Parse's numeric error code.
    public var code: Int {
        switch self {
        case .internalError: 1
        case .objectNotFound: 101
        case .invalidQuery: 102
        case .invalidClassName: 103
        case .missingObjectId: 104
        case .invalidKeyName: 105
        case .invalidPointer: 106
        case .invalidJSON: 107
        case .commandUnavailable: 108
        case .incorrectType: 111
        case .pushMisconfigured: 115
        case .objectTooLarge: 116
        case .operationForbidden: 119
        case .invalidACL: 123
        case .invalidEmailAddress: 125
        case .missingRequiredField: 135
        case .duplicateValue: 137
        case .scriptFailed: 141
        case .validationFailed: 142
        case .webhookError: 143
        case .usernameMissing: 200
        case .passwordMissing: 201
        case .usernameTaken: 202
        case .emailTaken: 203
        case .emailMissing: 204
        case .emailNotFound: 205
        case .sessionMissing: 206
        case .accountAlreadyLinked: 208
        case .invalidSessionToken: 209
        case .unsupportedService: 252
        case .tooManyRequests: 100
        case .otherCause: -1
        }
    }

    /// The message sent to the client (for `internalError`, a fixed text: the detail stays in logs).
    public var message: String {
        switch self {
        case .internalError: "Internal server error."
        case .objectNotFound(let m), .invalidQuery(let m), .invalidClassName(let m), .missingObjectId(let m),
             .invalidKeyName(let m), .invalidPointer(let m), .invalidJSON(let m), .commandUnavailable(let m),
             .incorrectType(let m), .objectTooLarge(let m), .operationForbidden(let m), .invalidACL(let m),
             .invalidEmailAddress(let m), .missingRequiredField(let m), .duplicateValue(let m), .validationFailed(let m),
             .usernameMissing(let m), .passwordMissing(let m), .usernameTaken(let m), .emailTaken(let m),
             .emailMissing(let m), .emailNotFound(let m), .otherCause(let m), .sessionMissing(let m), .accountAlreadyLinked(let m),
             .invalidSessionToken(let m), .unsupportedService(let m), .tooManyRequests(let m), .scriptFailed(let m), .webhookError(let m),
             .pushMisconfigured(let m):
            m
        }
    }

    public var description: String {
        if case .internalError(let detail) = self { return "ParseError 1: \(detail)" }
        return "ParseError \(code): \(message)"
    }

    // Parse Server's standard messages.
    public static let objectNotFound = ParseError.objectNotFound("Object not found.")
    public static let invalidLogin = ParseError.objectNotFound("Invalid username/password.")
    public static let invalidSession = ParseError.invalidSessionToken("Invalid session token")
    public static let expiredSession = ParseError.invalidSessionToken("Session token is expired.")
    public static let usernameMissing = ParseError.usernameMissing("bad or missing username")
    public static let passwordMissing = ParseError.passwordMissing("password is required.")
    public static let usernameTaken = ParseError.usernameTaken("Account already exists for this username.")
    public static let emailTaken = ParseError.emailTaken("Account already exists for this email address.")
    public static let invalidEmail = ParseError.invalidEmailAddress("Email address format is invalid.")
    public static let authDataLinked = ParseError.accountAlreadyLinked("this auth is already used")
    public static let unsupportedAuth = ParseError.unsupportedService("This authentication method is unsupported.")
    public static let nulCharacter = ParseError.invalidJSON("strings and keys may not contain the NUL character (\\u0000)")
}
