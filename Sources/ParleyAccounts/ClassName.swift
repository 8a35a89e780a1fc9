/// Class and field name rules.
public enum ClassName {
    /// Classes Parley maps to their own tables.
    public static let user = "_User"
    public static let session = "_Session"
    public static let installation = "_Installation"
    /// Roles: kept in `objects`, written through `RoleWriter`.
    public static let role = "_Role"

    /// `^[A-Za-z][A-Za-z0-9_]*$`, at most 128 bytes: a user-defined class or field name.
    public static func isValid(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard let first = utf8.first, utf8.count <= 128, isLetter(first) else { return false }
        return utf8.allSatisfy { isLetter($0) || ($0 >= 48 && $0 <= 57) || $0 == 95 }
    }

    /// One of the system classes Parley implements.
    public static func isSystem(_ name: String) -> Bool {
        name == user || name == session || name == installation || name == role
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) }
}
