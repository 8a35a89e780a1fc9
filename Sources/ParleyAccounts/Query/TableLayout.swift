/// How one Parse class is stored: its table, typed core columns, the jsonb column for custom
/// fields, how reads are restricted, and the mirrored GeoPoint column (docs/accounts-storage).
///
/// Table and column names are SQL identifiers written by Parley's code, never by clients; the
/// initialiser checks they are plain lowercase identifiers.
public struct TableLayout: Sendable, Equatable {
    /// The type of a core column, which decides how operands are encoded.
    public enum ColumnType: Sendable, Equatable {
        /// `text`.
        case string
        /// `boolean`.
        case boolean
        /// `timestamptz`; operands are Parse Dates (or ISO-8601 strings).
        case date
        /// `text` holding the objectId of a Pointer to `targetClass`; operands are Pointers.
        case pointer(targetClass: String)
        /// `jsonb`.
        case object
    }

    /// A Parse field stored in a typed column.
    public struct Column: Sendable, Equatable {
        /// The Parse field name (`username`, `emailVerified`).
        public var field: String
        /// The SQL column (`username`, `email_verified`).
        public var column: String
        public var type: ColumnType

        public init(field: String, column: String, type: ColumnType) {
            precondition(TableLayout.isIdentifier(column), "column \(column) is not a plain SQL identifier")
            self.field = field
            self.column = column
            self.type = type
        }
    }

    /// How a non-master read is restricted.
    public enum ReadAccess: Sendable, Equatable {
        /// `(column && ARRAY['*', <reader ids>]) IS TRUE` (flattened ACL; deliberately not
        /// index-backed, see docs/queries.md).
        case permissions(column: String)
        /// `column = ANY(<reader ids>)`: only rows the reader owns (sessions).
        case owner(column: String)
    }

    /// The Parse class name (`_User`, `GameScore`).
    public var className: String { storage.className }
    public var table: String { storage.table }
    /// `class_name` for the shared `objects` table: adds `class_name = <className>`.
    public var classColumn: String? { storage.classColumn }
    /// Typed columns other than `object_id`, `created_at`, `updated_at` (which every table has).
    /// They are selected after the standard columns, in this order.
    public var columns: [Column] { storage.columns }
    /// The jsonb column holding custom fields; nil when the class has none (sessions).
    public var dataColumn: String? { storage.dataColumn }
    /// The jsonb column holding the ACL as given; nil when the class has none (sessions).
    public var aclColumn: String? { storage.aclColumn }
    public var readAccess: ReadAccess { storage.readAccess }
    /// The `earth` column mirroring the class's one GeoPoint field; nil when geo queries are not
    /// possible.
    public var geoColumn: String? { storage.geoColumn }
    /// Fields only the master key may query or sort on (119 otherwise).
    public var masterOnlyFields: Set<String> { storage.masterOnlyFields }
    /// Fields nobody may query or sort on (102): secrets and internal state.
    public var hiddenFields: Set<String> { storage.hiddenFields }
    /// The columns every SELECT returns, in order, when `keys` is not given.
    var selectList: String { storage.selectList }

    /// Every property in one immutable object: a layout is copied along every query, and a copy
    /// then retains one reference instead of ten (atomically, on objects both loops share).
    private final class Storage: Sendable {
        let className: String
        let table: String
        let classColumn: String?
        let columns: [Column]
        let dataColumn: String?
        let aclColumn: String?
        let readAccess: ReadAccess
        let geoColumn: String?
        let masterOnlyFields: Set<String>
        let hiddenFields: Set<String>
        let selectList: String

        init(className: String, table: String, classColumn: String?, columns: [Column], dataColumn: String?, aclColumn: String?,
             readAccess: ReadAccess, geoColumn: String?, masterOnlyFields: Set<String>, hiddenFields: Set<String>, selectList: String) {
            self.className = className
            self.table = table
            self.classColumn = classColumn
            self.columns = columns
            self.dataColumn = dataColumn
            self.aclColumn = aclColumn
            self.readAccess = readAccess
            self.geoColumn = geoColumn
            self.masterOnlyFields = masterOnlyFields
            self.hiddenFields = hiddenFields
            self.selectList = selectList
        }
    }

    private let storage: Storage

    public init(className: String, table: String, classColumn: String? = nil, columns: [Column], dataColumn: String?,
                aclColumn: String?, readAccess: ReadAccess, geoColumn: String?, masterOnlyFields: Set<String> = [],
                hiddenFields: Set<String> = []) {
        for name in [table, classColumn, dataColumn, aclColumn, geoColumn].compactMap({ $0 }) {
            precondition(Self.isIdentifier(name), "\(name) is not a plain SQL identifier")
        }
        switch readAccess {
        case .permissions(let column), .owner(let column):
            precondition(Self.isIdentifier(column), "\(column) is not a plain SQL identifier")
        }
        var select = ["object_id", "created_at", "updated_at"]
        select.append(aclColumn.map { $0 == "acl" ? $0 : "\($0) AS acl" } ?? "NULL::jsonb AS acl")
        select.append(dataColumn.map { $0 == "data" ? $0 : "\($0) AS data" } ?? "'{}'::jsonb AS data")
        select.append(contentsOf: columns.map(\.column))
        storage = Storage(
            className: className, table: table, classColumn: classColumn, columns: columns, dataColumn: dataColumn,
            aclColumn: aclColumn, readAccess: readAccess, geoColumn: geoColumn, masterOnlyFields: masterOnlyFields,
            hiddenFields: hiddenFields, selectList: select.joined(separator: ", "))
    }

    public static func == (lhs: TableLayout, rhs: TableLayout) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.className == rhs.className && lhs.table == rhs.table && lhs.classColumn == rhs.classColumn
                && lhs.columns == rhs.columns && lhs.dataColumn == rhs.dataColumn && lhs.aclColumn == rhs.aclColumn
                && lhs.readAccess == rhs.readAccess && lhs.geoColumn == rhs.geoColumn
                && lhs.masterOnlyFields == rhs.masterOnlyFields && lhs.hiddenFields == rhs.hiddenFields)
    }

    /// The typed column of a Parse field, if it has one.
    public func column(forField field: String) -> Column? {
        columns.first { $0.field == field }
    }

    /// `_User` in `users`: email only for the master key; password, session tokens and auth data
    /// never queryable.
    public static let users = TableLayout(
        className: "_User", table: "users",
        columns: [
            Column(field: "username", column: "username", type: .string),
            Column(field: "email", column: "email", type: .string),
            Column(field: "emailVerified", column: "email_verified", type: .boolean),
        ],
        dataColumn: "data", aclColumn: "acl", readAccess: .permissions(column: "rperm"), geoColumn: "geo",
        masterOnlyFields: ["email"],
        hiddenFields: ["password", "sessionToken", "authData"])

    /// `_Session` in `sessions`: a non-master reader sees only its own sessions.
    public static let sessions = TableLayout(
        className: "_Session", table: "sessions",
        columns: [
            Column(field: "sessionToken", column: "token", type: .string),
            Column(field: "user", column: "user_id", type: .pointer(targetClass: "_User")),
            Column(field: "createdWith", column: "created_with", type: .object),
            Column(field: "installationId", column: "installation_id", type: .string),
            Column(field: "restricted", column: "restricted", type: .boolean),
            Column(field: "expiresAt", column: "expires_at", type: .date),
        ],
        dataColumn: nil, aclColumn: nil, readAccess: .owner(column: "user_id"), geoColumn: nil)

    /// `_Installation` in `installations`.
    public static let installations = TableLayout(
        className: "_Installation", table: "installations",
        columns: [
            Column(field: "installationId", column: "installation_id", type: .string),
            Column(field: "deviceType", column: "device_type", type: .string),
            Column(field: "deviceToken", column: "device_token", type: .string),
            Column(field: "voipDeviceToken", column: "voip_device_token", type: .string),
            Column(field: "user", column: "user_id", type: .pointer(targetClass: "_User")),
        ],
        dataColumn: "data", aclColumn: "acl", readAccess: .permissions(column: "rperm"), geoColumn: nil)

    /// Any other class, in the shared `objects` table.
    public static func objects(className: String) -> TableLayout {
        TableLayout(
            className: className, table: "objects", classColumn: "class_name", columns: [],
            dataColumn: "data", aclColumn: "acl", readAccess: .permissions(column: "rperm"), geoColumn: "geo")
    }

    /// The layout of a Parse class name: `_User`, `_Session`, `_Installation`, else `objects`.
    public static func forClass(_ className: String) -> TableLayout {
        switch className {
        case "_User": .users
        case "_Session": .sessions
        case "_Installation": .installations
        default: .objects(className: className)
        }
    }

    /// Lowercase letters, digits and underscores, starting with a letter.
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, first >= 0x61, first <= 0x7A else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }
}
