import COpenSSL
import Synchronization

/// The process's session-ticket keys: tickets are sealed with the newest key (AES-256-CBC and
/// HMAC-SHA256, random per process) and accepted while their key is at most two rotation
/// intervals old; a ticket under an older but still accepted key is renewed.
///
/// Shared by every server context, so resumption survives a certificate reload and works
/// across SNI names. Keys never leave memory; a restart invalidates every ticket.
public enum TLSTicketKeys {
    /// How long one key seals new tickets.
    public static let rotationInterval: Duration = .seconds(12 * 3600)

    struct Key {
        var name: [UInt8]
        var cipherKey: [UInt8]
        var macKey: [UInt8]
        var created: UInt64
    }

    private static let keys = Mutex<[Key]>([])

    /// Starts a new key now (the previous one is still accepted); for tests and operators.
    public static func rotate() {
        let now = EventLoop.monotonicNanoseconds()
        keys.withLock { $0 = rotated($0, now: now, force: true) }
    }

    /// Keys accepted now, newest first.
    static var currentKeyNames: [[UInt8]] { keys.withLock { $0.map(\.name) } }

    private static func rotated(_ keys: [Key], now: UInt64, force: Bool) -> [Key] {
        let interval = UInt64(rotationInterval.components.seconds) * 1_000_000_000
        var keys = keys
        if force || keys.isEmpty || now - keys[0].created >= interval {
            keys.insert(Key(name: random(16), cipherKey: random(32), macKey: random(32), created: now), at: 0)
        }
        return Array(keys.filter { now - $0.created < 2 * interval }.prefix(2))
    }

    private static func random(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }

    /// OpenSSL's ticket key callback: 1 = sealed/opened, 2 = opened and should be renewed,
    /// 0 = unknown key (full handshake), -1 = error.
    static let callback: @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?, OpaquePointer?, OpaquePointer?, Int32
    ) -> Int32 = { _, name, iv, cipher, mac, encrypt in
        guard let name, let iv, let cipher, let mac else { return -1 }
        let now = EventLoop.monotonicNanoseconds()
        let current = keys.withLock { keys -> [Key] in
            keys = rotated(keys, now: now, force: false)
            return keys
        }
        if encrypt == 1 {
            let key = current[0]
            guard RAND_bytes(iv, 16) == 1 else { return -1 }
            key.name.withUnsafeBufferPointer { name.update(from: $0.baseAddress!, count: 16) }
            guard parley_ticket_cipher_init(cipher, key.cipherKey, iv, 1) == 1,
                  parley_ticket_mac_init(mac, key.macKey, key.macKey.count) == 1 else { return -1 }
            return 1
        }
        guard let index = current.firstIndex(where: { key in (0..<16).allSatisfy { key.name[$0] == name[$0] } }) else { return 0 }
        let key = current[index]
        guard parley_ticket_mac_init(mac, key.macKey, key.macKey.count) == 1,
              parley_ticket_cipher_init(cipher, key.cipherKey, iv, 0) == 1 else { return -1 }
        return index == 0 ? 1 : 2
    }
}
