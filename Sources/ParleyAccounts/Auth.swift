/// Who a request acts as.
public struct Auth: Sendable, Equatable {
    /// The master key was given: every ACL and ownership check is bypassed.
    public let isMaster: Bool
    /// The user of a valid session token, if any.
    public let user: SessionInfo?
    /// `X-Parse-Installation-Id` (or `_InstallationId`), if sent.
    public let installationId: String?
    /// The `role:<name>` entries of every role the user holds (`RoleStore`), empty without one.
    public let roles: [String]

    public init(isMaster: Bool, user: SessionInfo?, installationId: String?, roles: [String] = []) {
        self.isMaster = isMaster
        self.user = user
        self.installationId = installationId
        self.roles = roles
    }

    public static let master = Auth(isMaster: true, user: nil, installationId: nil)
    public static let anonymous = Auth(isMaster: false, user: nil, installationId: nil)

    /// The user's objectId, if a session was given.
    public var userId: String? { user?.userId }

    /// The `rperm`/`wperm` entries that grant this caller access: `*`, the user id, its roles.
    public var permissionKeys: [String] {
        if let userId { return roles.isEmpty ? ["*", userId] : ["*", userId] + roles }
        return ["*"]
    }

    /// Whether the caller may change the user `userId` (itself or master).
    public func canModifyUser(_ userId: String) -> Bool {
        isMaster || self.userId == userId
    }
}

/// A session, as the session cache holds it. Whether it is valid is `SessionStore`'s rule.
///
/// A class with constant fields: a cache hit and every `Auth` holding it copy one reference.
public final class SessionInfo: Sendable, Equatable {
    /// The `_Session` objectId.
    public let sessionId: String
    public let token: String
    public let userId: String
    /// Expiry, milliseconds since the Unix epoch.
    public let expiresAt: Int64
    public let installationId: String?

    public init(sessionId: String, token: String, userId: String, expiresAt: Int64, installationId: String?) {
        self.sessionId = sessionId
        self.token = token
        self.userId = userId
        self.expiresAt = expiresAt
        self.installationId = installationId
    }

    /// Not expired at `now` (milliseconds since the Unix epoch): the expiry half of the validity rule.
    @inline(__always)
    public func isLive(at now: Int64) -> Bool { expiresAt > now }

    public static func == (lhs: SessionInfo, rhs: SessionInfo) -> Bool {
        lhs === rhs || (lhs.sessionId == rhs.sessionId && lhs.token == rhs.token && lhs.userId == rhs.userId
            && lhs.expiresAt == rhs.expiresAt && lhs.installationId == rhs.installationId)
    }
}
