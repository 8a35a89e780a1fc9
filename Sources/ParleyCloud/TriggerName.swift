/// A trigger Parley runs around a Parse request (Parse Server's `triggers.Types` that apply here).
public enum TriggerName: String, Sendable, CaseIterable {
    case beforeSave, afterSave, beforeDelete, afterDelete

    /// An after* trigger: delivered in the background, never failing its request.
    public var isAfter: Bool { self == .afterSave || self == .afterDelete }
}
