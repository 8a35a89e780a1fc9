/// The SQL functions the realtime layer offers other modules' statements
/// (migrations/0009_realtime_devices_contacts.sql): set-returning SQL functions that the planner
/// inlines, so a statement reading through them costs what reading the tables did.
public enum RealtimeSQLFunctions {
    /// `(user text) → SETOF text`: the user's device ids.
    public static let userDevices = "rt_user_devices"
    /// `(stale interval) → SETOF text`: nodes whose heartbeat is more recent than `stale`.
    public static let liveNodes = "rt_live_nodes"
    /// `(from text[], to text[]) → void`: records that `from[i]` reached `to[i]` (a message or a call).
    public static let addContacts = "rt_add_contacts"
    /// `(user text, others text[]) → SETOF text`: the users among `others` who reached `user`.
    public static let reachedBy = "rt_reached_by"
}
