import CSodium
import Synchronization

/// Makes sure `sodium_init()` ran once before any libsodium call.
enum Sodium {
    private static let initialised: Bool = {
        sodium_init() >= 0
    }()

    /// Initialises libsodium (idempotent, thread-safe); traps if the library cannot start, as
    /// nothing secure can be done without it.
    static func ensureInitialised() {
        precondition(initialised, "libsodium failed to initialise")
    }

    /// `count` cryptographically secure random bytes.
    static func randomBytes(_ count: Int) -> [UInt8] {
        ensureInitialised()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        return bytes
    }

    /// A uniformly random integer in `0..<upperBound`.
    static func uniform(_ upperBound: UInt32) -> UInt32 {
        ensureInitialised()
        return randombytes_uniform(upperBound)
    }
}

/// Compares two strings in time that depends only on their lengths (for keys and secrets).
public func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
    var lhs = lhs
    // Over the UTF-8 storage in place: this runs for the app id of every request.
    return lhs.withUTF8 { constantTimeEquals($0, rhs) }
}

/// `constantTimeEquals` of UTF-8 bytes (a header value read in place) and a string.
public func constantTimeEquals(_ a: UnsafeBufferPointer<UInt8>, _ rhs: String) -> Bool {
    var rhs = rhs
    return rhs.withUTF8 { b in
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        let n = max(a.count, b.count)
        for i in 0..<n {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= x ^ y
        }
        return difference == 0 && a.count == b.count
    }
}
