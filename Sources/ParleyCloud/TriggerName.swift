/// A trigger Parley runs around a Parse request (Parse Server's `triggers.Types` that apply here).
public enum TriggerName: String, Sendable, CaseIterable {
    case beforeSave, afterSave, beforeDelete, afterDelete, beforeLogin, afterLogin, beforeFind, afterFind

    /// An after* trigger delivered in the background, never failing its request (afterFind is not
    /// one: it runs before the answer and may rewrite it).
    public var isAfter: Bool { self == .afterSave || self == .afterDelete || self == .afterLogin }

    /// The login triggers exist on `_User` only (as Parse Server's `beforeLogin`/`afterLogin`).
    public var isLogin: Bool { self == .beforeLogin || self == .afterLogin }
}
