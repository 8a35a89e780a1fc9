import ParleyJSON

/// What class-level permissions leave a viewer of the class a subquery (`$inQuery`,
/// `$notInQuery`, `$select`, `$dontSelect`) reads: decided by `QueryRunner` before compiling,
/// as Parse Server runs each subquery as a `find` on its class.
public enum SubqueryScope: Sendable, Equatable {
    /// Every row the viewer's ACL lets it read.
    case open
    /// Only rows also matching this `where` object (pointer permissions).
    case constrained(JSONValue)
    /// No row (pointer permissions without a session).
    case nothing

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
                if operators.contains(key), case .object(let operand) = member {
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
