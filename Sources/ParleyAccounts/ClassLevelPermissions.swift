import ParleyJSON

/// An operation that class-level permissions govern.
public enum ClassOperation: String, Sendable, CaseIterable {
    case find, count, get, create, update, delete, addField

    /// Read operations consult `readUserFields`, the others `writeUserFields`.
    var reads: Bool { self == .find || self == .count || self == .get }
}

/// What class-level permissions leave a viewer allowed to do for one operation (a refusal is
/// thrown instead): the `_User` pointer fields one of which must hold the viewer, and the fields
/// hidden from what it reads.
public struct ClassAccess: Sendable, Equatable {
    /// Pointer (or array of pointers) fields, one of which must point to the viewer; empty: no
    /// constraint. With no session nothing matches.
    public var pointerFields: [String]
    /// Fields left out of every object the viewer reads (`protectedFields`).
    public var protectedFields: [String]
    /// Whether a create or update may add fields to the class (`addField`).
    public var addField: AddField
    /// `protectedFields` `userField:<field>` entries: an object whose `field` points to the viewer
    /// (or is an array holding such a pointer) hides only the `protectedFields` also in `fields`.
    public var userFieldProtections: [UserFieldProtection] = []

    /// One `userField:<field>` entry of `protectedFields`.
    public struct UserFieldProtection: Sendable, Equatable {
        public var field: String
        public var fields: [String]
    }

    /// The `addField` permission of a write.
    public enum AddField: Sendable, Equatable {
        case allowed
        /// Refused with this error when the write has a field the class does not have.
        case denied(ParseError)
        /// An update adding a field must also match one of these pointer fields.
        case pointerFields([String])
    }

    public init(pointerFields: [String] = [], protectedFields: [String] = [], addField: AddField = .allowed) {
        self.pointerFields = pointerFields
        self.protectedFields = protectedFields
        self.addField = addField
    }

    /// No constraint: the master key, or a class with Parse's default permissions.
    public static let unrestricted = ClassAccess()
}

/// A class's `classLevelPermissions` (Parse Server's `SchemaController`): who may run each
/// operation (`*`, `requiresAuthentication`, user ids, `role:` names, `pointerFields`), the
/// `readUserFields`/`writeUserFields` pointer permissions and `protectedFields`.
///
/// A class that never had permissions set has Parse's defaults (every operation public). Once
/// set, an operation missing from them is allowed to nobody but the master key, as Parse
/// Server on PostgreSQL merges stored permissions over empty ones.
public struct ClassLevelPermissions: Sendable, Equatable {
    /// Who may run one operation.
    struct Rule: Sendable, Equatable {
        var isPublic = false
        var requiresAuthentication = false
        /// User ids and `role:<name>` entries.
        var grantees: Set<String> = []
        var pointerFields: [String] = []
    }

    private var rules: [ClassOperation: Rule]
    private var readUserFields: [String] = []
    private var writeUserFields: [String] = []
    /// Entry (`*`, `authenticated`, user id, `role:` name) → fields hidden from it.
    private var protectedFields: [String: [String]] = [:]
    /// The stored JSON, nil for the defaults.
    public let stored: JSONObject?

    /// Parse Server's defaults: every operation public, nothing protected.
    public static let defaults = ClassLevelPermissions(stored: nil)

    /// Most bytes of a permissions document (116 beyond).
    public static let maxBytes = 32 * 1024
    /// Most entries in one operation or list (107 beyond).
    public static let maxEntries = 1000

    /// The permissions of a stored document (validated when it was stored); nil: the defaults.
    public init(stored: JSONObject?) {
        self.stored = stored
        guard let stored else {
            var open = Rule()
            open.isPublic = true
            rules = Dictionary(uniqueKeysWithValues: ClassOperation.allCases.map { ($0, open) })
            return
        }
        rules = [:]
        for operation in ClassOperation.allCases {
            var rule = Rule()
            for (key, value) in stored[operation.rawValue]?.object ?? [:] {
                switch key {
                case "*": rule.isPublic = value.bool == true
                case "requiresAuthentication": rule.requiresAuthentication = value.bool == true
                case "pointerFields": rule.pointerFields = value.array?.compactMap(\.string) ?? []
                default: if value.bool == true { rule.grantees.insert(key) }
                }
            }
            rules[operation] = rule
        }
        readUserFields = stored["readUserFields"]?.array?.compactMap(\.string) ?? []
        writeUserFields = stored["writeUserFields"]?.array?.compactMap(\.string) ?? []
        for (entry, fields) in stored["protectedFields"]?.object ?? [:] {
            protectedFields[entry] = fields.array?.compactMap(\.string) ?? []
        }
    }

    /// Validates a `classLevelPermissions` body against the class's `fields` (name → type) as
    /// Parse Server's `validateCLP` does: 107 with its messages.
    public init(validating value: JSONValue, fields: [String: ParseFieldType]) throws(ParseError) {
        guard case .object(let object) = value else {
            throw .invalidJSON("'\(value.serialized())' is not a valid value for classLevelPermissions - must be an object")
        }
        guard value.serialized().utf8.count <= Self.maxBytes else { throw .objectTooLarge("classLevelPermissions is limited to \(Self.maxBytes) bytes") }
        let operations = Set(ClassOperation.allCases.map(\.rawValue))
        for (key, operation) in object {
            switch key {
            case "readUserFields", "writeUserFields":
                guard case .array(let names) = operation else {
                    throw .invalidJSON("'\(operation.serialized())' is not a valid value for class level permissions \(key) - must be an array")
                }
                for name in names { try Self.validatePointerField(name, fields: fields, operation: key) }
            case "protectedFields":
                guard case .object(let entries) = operation else {
                    throw .invalidJSON("'\(operation.serialized())' is not a valid value for class level permissions \(key) - must be an object")
                }
                for (entry, list) in entries {
                    guard Self.isProtectedFieldsEntry(entry) else { throw .invalidJSON("'\(entry)' is not a valid key for class level permissions") }
                    guard case .array(let names) = list, names.count <= Self.maxEntries else {
                        throw .invalidJSON("'\(list.serialized())' is not a valid value for protectedFields[\(entry)] - expected an array.")
                    }
                    for name in names {
                        guard let field = name.string else { throw .invalidJSON("'\(name.serialized())' is not a valid value for protectedFields[\(entry)]") }
                        if ClassSchema.defaultFieldNames.contains(field) { throw .invalidJSON("Default field '\(field)' can not be protected") }
                        guard fields[field] != nil else { throw .invalidJSON("Field '\(field)' in protectedFields:\(entry) does not exist") }
                    }
                }
            default:
                guard operations.contains(key) else { throw .invalidJSON("\(key) is not a valid operation for class level permissions") }
                guard case .object(let entries) = operation else {
                    throw .invalidJSON("'\(operation.serialized())' is not a valid value for class level permissions \(key) - must be an object")
                }
                guard entries.count <= Self.maxEntries else { throw .invalidJSON("class level permissions \(key) has more than \(Self.maxEntries) entries") }
                for (entry, permit) in entries {
                    guard Self.isPermissionEntry(entry) else { throw .invalidJSON("'\(entry)' is not a valid key for class level permissions") }
                    if entry == "pointerFields" {
                        guard case .array(let names) = permit else {
                            throw .invalidJSON("'\(permit.serialized())' is not a valid value for \(key)[\(entry)] - expected an array.")
                        }
                        for name in names { try Self.validatePointerField(name, fields: fields, operation: key) }
                        continue
                    }
                    guard permit.bool == true else {
                        throw .invalidJSON("'\(permit.serialized())' is not a valid value for class level permissions \(key):\(entry):\(permit.serialized())")
                    }
                }
            }
        }
        self.init(stored: object)
    }

    /// The `classLevelPermissions` a schema shows: the defaults, or every operation (empty
    /// when not stored) with the stored entries.
    public var json: JSONObject {
        guard let stored else {
            var object = JSONObject()
            for operation in ClassOperation.allCases { object[operation.rawValue] = ["*": true] }
            object["protectedFields"] = ["*": .array([])]
            return object
        }
        var object = JSONObject()
        for operation in ClassOperation.allCases { object[operation.rawValue] = .object([:]) }
        object["protectedFields"] = .object([:])
        for (key, value) in stored { object[key] = value }
        return object
    }

    /// Whether every operation is public and nothing is protected: nothing to enforce.
    public var isOpen: Bool {
        rules.values.allSatisfy(\.isPublic) && readUserFields.isEmpty && writeUserFields.isEmpty
            && protectedFields.values.allSatisfy(\.isEmpty)
    }

    /// What `auth` (not master) may do for `operation` on `className`, as Parse Server's
    /// `validatePermission`, `addPointerPermissions` and `addProtectedFields`: 119 "Permission
    /// denied for action …" when nothing grants it, 101 when only authenticated users may.
    /// `updating` is true for an `addField` during an update (pointer permissions may grant it).
    public func access(_ operation: ClassOperation, className: String, auth: Auth, updating: Bool = false) throws(ParseError) -> ClassAccess {
        let rule = rules[operation] ?? Rule()
        let keys = auth.permissionKeys
        let granted = rule.isPublic || keys.contains { rule.grantees.contains($0) }
        var pointerFields: [String] = []
        if !granted {
            if rule.requiresAuthentication {
                guard auth.userId != nil else { throw .objectNotFound("Permission denied, user needs to be authenticated.") }
            } else {
                let denied = ParseError.operationForbidden("Permission denied for action \(operation.rawValue) on class \(className).")
                if operation == .create { throw denied }
                pointerFields = rule.pointerFields
                for field in operation.reads ? readUserFields : writeUserFields where !pointerFields.contains(field) {
                    pointerFields.append(field)
                }
                if pointerFields.isEmpty || (operation == .addField && !updating && (operation.reads ? readUserFields : writeUserFields).isEmpty) {
                    throw denied
                }
            }
        }
        var access = ClassAccess(pointerFields: pointerFields, protectedFields: operation.reads ? hiddenFields(for: auth) : [])
        if operation.reads, !access.protectedFields.isEmpty, auth.userId != nil {
            access.userFieldProtections = protectedFields.compactMap { entry, fields in
                entry.hasPrefix("userField:") ? ClassAccess.UserFieldProtection(field: String(entry.dropFirst(10)), fields: fields) : nil
            }.sorted { $0.field < $1.field }
        }
        if operation == .create || operation == .update {
            do {
                let adding = try self.access(.addField, className: className, auth: auth, updating: operation == .update)
                access.addField = adding.pointerFields.isEmpty || operation == .create ? .allowed : .pointerFields(adding.pointerFields)
            } catch {
                access.addField = .denied(error)
            }
        }
        return access
    }

    /// The fields hidden from `auth`: the intersection of the lists of every entry that applies
    /// to it (`*`, `authenticated`, its roles, its id), as Parse Server's `addProtectedFields`.
    /// `userField:` entries are applied per object (`ClassAccess.userFieldProtections`).
    func hiddenFields(for auth: Auth) -> [String] {
        guard !protectedFields.isEmpty else { return [] }
        var sets: [[String]] = []
        if let fields = protectedFields["*"] { sets.append(fields) }
        if let userId = auth.userId {
            if let fields = protectedFields["authenticated"] { sets.append(fields) }
            for role in auth.roles { if let fields = protectedFields[role] { sets.append(fields) } }
            if let fields = protectedFields[userId] { sets.append(fields) }
        }
        guard var hidden = sets.first else { return [] }
        for set in sets.dropFirst() { hidden = hidden.filter(set.contains) }
        var seen = Set<String>()
        return hidden.filter { seen.insert($0).inserted }
    }

    private static func isPermissionEntry(_ key: String) -> Bool {
        key == "pointerFields" || key == "*" || key == "requiresAuthentication" || key.hasPrefix("role:") || isUserId(key)
    }

    private static func isProtectedFieldsEntry(_ key: String) -> Bool {
        key.hasPrefix("userField:") || key == "*" || key == "authenticated" || key.hasPrefix("role:") || isUserId(key)
    }

    /// Parse's `^[a-zA-Z0-9]{1,}$` for user ids (no custom object ids).
    private static func isUserId(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= 128 && key.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }
    }

    /// A pointer permission field must be a `Pointer<_User>` or an `Array` field of the class.
    private static func validatePointerField(_ name: JSONValue, fields: [String: ParseFieldType], operation: String) throws(ParseError) {
        guard let field = name.string, let type = fields[field], type == .pointer(targetClass: ClassName.user) || type == .array else {
            throw .invalidJSON("'\(name.string ?? name.serialized())' is not a valid column for class level pointer permissions \(operation)")
        }
    }
}
