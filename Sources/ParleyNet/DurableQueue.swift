/// A table of work done at least once, as a `DurableQueueWorker` drives it: items are claimed
/// (leased to this node, so nodes never take the same one), attempted, and their outcome
/// recorded; an item claimed but never recorded is claimed again once its lease expires.
public protocol DurableQueue: Sendable {
    associatedtype Item: Sendable
    associatedtype Outcome: Sendable

    /// What an item is, for log lines ("mail", "webhook delivery").
    var itemName: String { get }

    /// Claims up to `limit` due items.
    func claim(limit: Int) async throws -> [Item]

    /// Does `item`'s work (a send); never throws: a failure is an outcome.
    func attempt(_ item: Item) async -> Outcome

    /// Commits `outcome`; answers when the item is due again (a retry), if it is.
    func record(_ item: Item, _ outcome: Outcome) async throws -> Duration?

    /// Upkeep run before claiming, at most once per poll interval (recovering leases, retention).
    func maintain() async
}
