import ParleyJSON

/// Parse's schema of a class as `/schemas` shows it, and the rules for the names and types a
/// schema may declare (Parse Server's `SchemaController`).
public enum ClassSchema {
    /// Fields every class has.
    public static let defaultFieldNames: Set<String> = ["objectId", "createdAt", "updatedAt", "ACL"]
    /// Most fields one class may declare through `/schemas` (116 beyond).
    public static let maxFields = 1000
    /// Most indexes one class may have (116 beyond).
    public static let maxIndexes = 64

    /// The fields of `className` Parse Server always lists (`defaultColumns`).
    public static func defaultFields(_ className: String) -> JSONObject {
        var fields: JSONObject = [
            "objectId": ["type": "String"], "createdAt": ["type": "Date"], "updatedAt": ["type": "Date"], "ACL": ["type": "ACL"],
        ]
        let extra: JSONObject
        switch className {
        case ClassName.user:
            extra = ["username": ["type": "String"], "password": ["type": "String"], "email": ["type": "String"],
                     "emailVerified": ["type": "Boolean"], "authData": ["type": "Object"]]
        case ClassName.installation:
            extra = ["installationId": ["type": "String"], "deviceToken": ["type": "String"], "channels": ["type": "Array"],
                     "deviceType": ["type": "String"], "pushType": ["type": "String"], "GCMSenderId": ["type": "String"],
                     "timeZone": ["type": "String"], "localeIdentifier": ["type": "String"], "badge": ["type": "Number"],
                     "appVersion": ["type": "String"], "appName": ["type": "String"], "appIdentifier": ["type": "String"],
                     "parseVersion": ["type": "String"]]
        case ClassName.role:
            extra = ["name": ["type": "String"], "users": ["type": "Relation", "targetClass": "_User"],
                     "roles": ["type": "Relation", "targetClass": "_Role"]]
        case ClassName.session:
            extra = ["user": ["type": "Pointer", "targetClass": "_User"], "installationId": ["type": "String"],
                     "sessionToken": ["type": "String"], "expiresAt": ["type": "Date"], "createdWith": ["type": "Object"]]
        default:
            extra = [:]
        }
        for (key, value) in extra { fields[key] = value }
        return fields
    }

    /// Parse's message for a class name it refuses (103).
    public static func invalidClassName(_ className: String) -> ParseError {
        .invalidClassName("Invalid classname: \(className), classnames can only have alphanumeric characters and _, and must start with an alpha character ")
    }

    /// Whether `/schemas` may name `className`: a system class Parley has or a valid name.
    public static func isValidClassName(_ className: String) -> Bool {
        ClassName.isSystem(className) || ClassName.isValid(className)
    }

    /// Parse's `fieldNameIsValid`: letters, digits and `_`, starting with a letter, not
    /// `className` or `length`.
    static func isValidFieldName(_ name: String) -> Bool {
        ClassName.isValid(name) && name != "className" && name != "length"
    }

    /// A declared field `{type, targetClass?, required?, defaultValue?}` checked as Parse Server's
    /// `fieldTypeIsInvalid` and `validateSchemaData`: its type, and its options.
    static func field(_ name: String, _ value: JSONValue, className: String) throws(ParseError) -> FieldDeclaration {
        guard case .object(let object) = value else { throw .invalidJSON("invalid JSON") }
        let typeValue = object["type"] ?? .null
        let target = object["targetClass"]
        let type: ParseFieldType
        switch typeValue.string {
        case "Pointer", "Relation":
            guard let target, !target.isNull else { throw .missingRequiredField("type \(typeValue.string ?? "") needs a class name") }
            guard let targetClass = target.string else { throw .invalidJSON("invalid JSON") }
            guard isValidClassName(targetClass) else { throw invalidClassName(targetClass) }
            type = typeValue.string == "Pointer" ? .pointer(targetClass: targetClass) : .relation(targetClass: targetClass)
        case .some(let name):
            guard let parsed = ParseFieldType(name: name, targetClass: nil) else { throw .incorrectType("invalid field type: \(name)") }
            type = parsed
        case nil:
            throw .invalidJSON("invalid JSON")
        }
        var declaration = FieldDeclaration(name: name, type: type)
        if let required = object["required"] {
            guard let flag = required.bool else { throw .invalidJSON("invalid JSON: required must be a boolean") }
            if flag, case .relation = type { throw .incorrectType("The 'required' option is not applicable for \(type)") }
            declaration.required = flag
        }
        if let defaultValue = object["defaultValue"], !defaultValue.isNull {
            if case .relation = type { throw .incorrectType("The 'default value' option is not applicable for \(type)") }
            let (valueType, normalised) = try ParseValue.normalise(defaultValue)
            guard valueType == type else {
                throw .incorrectType("schema mismatch for \(className).\(name) default value; expected \(type) but got \(valueType.map { "\($0)" } ?? "null")")
            }
            declaration.defaultValue = normalised
        }
        return declaration
    }

    /// One field's schema as `/schemas` shows it.
    static func json(type: ParseFieldType, required: Bool, defaultValue: JSONValue?) -> JSONValue {
        var object: JSONObject = ["type": .string(type.name)]
        if let target = type.targetClass { object["targetClass"] = .string(target) }
        if required { object["required"] = true }
        if let defaultValue { object["defaultValue"] = defaultValue }
        return .object(object)
    }
}

/// A field a `/schemas` request declares.
struct FieldDeclaration: Sendable {
    var name: String
    var type: ParseFieldType
    var required = false
    var defaultValue: JSONValue?
}
