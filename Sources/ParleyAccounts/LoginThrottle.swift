import ParleyLog
import ParleyNet
import Synchronization

/// Bounds failed logins per account (username or email, case-folded) and per client address in
/// a sliding window, in memory on each node.
///
/// In memory rather than a table: it costs the login path one lock and no statement, and a node
/// is what an attacker's flood reaches; with N nodes behind a balancer an attacker gets at most N
/// times the budget, which the account lockout (a table) still caps across nodes. An attempt is
/// counted when it starts and given back when it succeeds, so concurrent attempts (a batch of 50
/// logins) cannot pass the limit together.
public final class LoginThrottle: Sendable {
    /// Failed logins one account may have in `window`; 0 disables the account limit.
    public let perAccount: Int
    /// Failed logins one client address may have in `window`; 0 disables the address limit.
    public let perAddress: Int
    /// How long failures count.
    public let window: Duration
    /// Most accounts plus addresses tracked; past it, expired entries go, then the oldest.
    public let maxEntries: Int

    private struct Entry {
        var failures: Int
        var windowStart: Int64
    }

    private let state = Mutex<[String: Entry]>([:])

    public init(perAccount: Int = 10, perAddress: Int = 100, window: Duration = .seconds(900), maxEntries: Int = 100_000) {
        self.perAccount = max(0, perAccount)
        self.perAddress = max(0, perAddress)
        self.window = window
        self.maxEntries = max(16, maxEntries)
    }

    /// What a login attempt counts against.
    public struct Attempt: Sendable {
        let keys: [(key: String, limit: Int)]
    }

    /// Counts an attempt for `account` from `address`, or throws 100/429 ("Too many requests.",
    /// as Parse Server's `rateLimit`) when either is over its limit.
    public func begin(account: String?, address: String) throws(ParseError) -> Attempt {
        var keys: [(key: String, limit: Int)] = []
        if perAccount > 0, let account, !account.isEmpty { keys.append(("a:" + account.lowercased(), perAccount)) }
        if perAddress > 0 { keys.append(("i:" + address, perAddress)) }
        guard !keys.isEmpty else { return Attempt(keys: []) }
        let now = UTCTime.nowMilliseconds()
        let windowMilliseconds = window.wholeMilliseconds
        let admitted = state.withLock { entries -> Bool in
            for (key, limit) in keys {
                if let entry = entries[key], now - entry.windowStart < windowMilliseconds, entry.failures >= limit { return false }
            }
            for (key, _) in keys {
                var entry = entries[key] ?? Entry(failures: 0, windowStart: now)
                if now - entry.windowStart >= windowMilliseconds { entry = Entry(failures: 0, windowStart: now) }
                entry.failures += 1
                entries[key] = entry
            }
            if entries.count > maxEntries { Self.evict(&entries, now: now, window: windowMilliseconds, keep: maxEntries) }
            return true
        }
        guard admitted else { throw ParseError.tooManyLogins }
        return Attempt(keys: keys)
    }

    /// The attempt succeeded: its account starts afresh and it no longer counts against its address.
    public func succeeded(_ attempt: Attempt) {
        guard !attempt.keys.isEmpty else { return }
        state.withLock { entries in
            for (key, _) in attempt.keys {
                if key.hasPrefix("a:") {
                    entries[key] = nil
                } else if var entry = entries[key] {
                    entry.failures = max(0, entry.failures - 1)
                    entries[key] = entry
                }
            }
        }
    }

    /// Something other than the credentials failed (a malformed request, the database): the
    /// attempt does not count.
    public func cancelled(_ attempt: Attempt) {
        guard !attempt.keys.isEmpty else { return }
        state.withLock { entries in
            for (key, _) in attempt.keys {
                if var entry = entries[key] {
                    entry.failures = max(0, entry.failures - 1)
                    entries[key] = entry
                }
            }
        }
    }

    private static func evict(_ entries: inout [String: Entry], now: Int64, window: Int64, keep: Int) {
        entries = entries.filter { now - $0.value.windowStart < window }
        guard entries.count > keep else { return }
        let oldest = entries.sorted { $0.value.windowStart < $1.value.windowStart }.prefix(entries.count - keep * 3 / 4)
        for (key, _) in oldest { entries[key] = nil }
    }
}

extension ParseError {
    /// A login over `LoginThrottle`'s limits, or one the argon2id queue cannot take: Parse
    /// Server's `rateLimit` answer.
    public static let tooManyLogins = ParseError.tooManyRequests("Too many requests.")
}
