/// A trigger Parley runs: around a Parse request (Parse Server's `triggers.Types` that apply
/// here), or on Parley's own traffic (messages and calls, on the pseudo-classes `_Message` and
/// `_Call`).
public enum TriggerName: String, Sendable, CaseIterable {
    case beforeSave, afterSave, beforeDelete, afterDelete, beforeLogin, afterLogin, beforeFind, afterFind
    case beforeMessage, afterMessage, beforeCall, afterCallEnded

    /// An after* trigger delivered in the background, never failing its request (afterFind is not
    /// one: it runs before the answer and may rewrite it).
    public var isAfter: Bool { self == .afterSave || self == .afterDelete || self == .afterLogin }

    /// The login triggers exist on `_User` only (as Parse Server's `beforeLogin`/`afterLogin`).
    public var isLogin: Bool { self == .beforeLogin || self == .afterLogin }

    /// The pseudo-class of the message and call triggers.
    public static let messageClass = "_Message"
    public static let callClass = "_Call"

    /// The only class this trigger may be registered on; nil for any class.
    public var requiredClassName: String? {
        switch self {
        case .beforeLogin, .afterLogin: "_User"
        case .beforeMessage, .afterMessage: Self.messageClass
        case .beforeCall, .afterCallEnded: Self.callClass
        case .beforeSave, .afterSave, .beforeDelete, .afterDelete, .beforeFind, .afterFind: nil
        }
    }

    /// A Parse trigger name registered on a message or call pseudo-class runs nowhere, so it is refused.
    static func isTrafficClass(_ className: String) -> Bool { className == messageClass || className == callClass }
}
