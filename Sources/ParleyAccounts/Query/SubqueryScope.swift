import ParleyJSON

/// What class-level permissions leave a viewer of the class a subquery (`$inQuery`,
/// `$notInQuery`, `$select`, `$dontSelect`) reads: decided by `QueryRunner` before compiling,
/// as Parse Server runs each subquery as a `find` on its class.
public struct SubqueryScope: Sendable, Equatable {
    /// Which of the rows the viewer's ACL lets it read the subquery reads.
    public enum Rows: Sendable, Equatable {
        /// All of them.
        case all
        /// Those also matching this `where` object (pointer permissions).
        case matching(JSONValue)
        /// None (pointer permissions without a session).
        case none
    }

    public var rows: Rows
    /// Fields the viewer may neither constrain nor select (`protectedFields`): 119.
    public var protectedFields: [String]

    public init(rows: Rows = .all, protectedFields: [String] = []) {
        self.rows = rows
        self.protectedFields = protectedFields
    }

    /// Every readable row, no protected field.
    public static let open = SubqueryScope()

    /// Most levels of subqueries inside subqueries (102 beyond).
    public static let maxDepth = 4
    /// The subquery operators.
    static let operators: Set<String> = ["$inQuery", "$notInQuery", "$select", "$dontSelect"]

    /// The classes the subqueries in `where` read (at any depth), in first-seen order; at most
    /// `limit` are collected.
    public static func classes(in value: JSONValue?, limit: Int = 64) -> [String] {
        var classes: [String] = []
        if let value { collect(value, into: &classes, limit: limit) }
        return classes
    }

    private static func collect(_ value: JSONValue, into classes: inout [String], limit: Int) {
        switch value {
        case .array(let items):
            for item in items { collect(item, into: &classes, limit: limit) }
        case .object(let object):
            for (key, member) in object {
                // The byte test first: a hash of every plain field name showed on each find.
                if key.utf8.first == UInt8(ascii: "$"), operators.contains(key), case .object(let operand) = member {
                    let query = key == "$inQuery" || key == "$notInQuery" ? operand : operand["query"]?.object
                    if let name = query?["className"]?.string, !classes.contains(name), classes.count < limit { classes.append(name) }
                }
                collect(member, into: &classes, limit: limit)
            }
        default:
            return
        }
    }
}
