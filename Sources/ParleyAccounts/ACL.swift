import ParleyJSON

/// A Parse ACL: who may read and who may write an object.
///
/// Entries are `*` (everyone), user objectIds, or `role:Name` (granted to the role's users,
/// `RoleStore`). Flattened into `rperm`/`wperm` arrays.
public struct ACL: Sendable, Equatable {
    /// The ACL as the client sent it (normalised to `read`/`write` true members only).
    public let json: JSONObject
    public let readers: [String]
    public let writers: [String]

    /// Parses a client ACL. Error 123 for anything but `{"key": {"read": Bool, "write": Bool}}`.
    public init(json value: JSONValue) throws(ParseError) {
        guard case .object(let object) = value else { throw .invalidACL("Invalid ACL: expected an object") }
        var normalised = JSONObject()
        var readers: [String] = []
        var writers: [String] = []
        for (key, permissions) in object {
            guard !key.isEmpty, key.utf8.count <= 256, !key.utf8.contains(0) else { throw .invalidACL("Invalid ACL key") }
            guard case .object(let perms) = permissions else { throw .invalidACL("Invalid ACL: permissions of \(key) must be an object") }
            var entry = JSONObject()
            for (perm, flag) in perms {
                guard perm == "read" || perm == "write", let allowed = flag.bool else {
                    throw .invalidACL("Invalid ACL: \(key) may only have boolean read and write")
                }
                if allowed {
                    entry[perm] = true
                    if perm == "read" { readers.append(key) } else { writers.append(key) }
                }
            }
            if !entry.isEmpty { normalised[key] = .object(entry) }
        }
        json = normalised
        self.readers = readers
        self.writers = writers
    }

    /// The default ACL of a new user: everyone reads, only the user writes.
    public static func userDefault(userId: String) -> ACL {
        // Cannot fail: the literal has the right shape.
        let everyone: JSONValue = ["read": true]
        let owner: JSONValue = ["read": true, "write": true]
        return try! ACL(json: .object(JSONObject([("*", everyone), (userId, owner)])))
    }

    /// Reader/writer arrays for objects without an ACL (public read and write).
    public static let publicPermissions = ["*"]
}
