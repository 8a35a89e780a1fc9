import Synchronization

/// Server-generated message ids: UUID version 7 (48-bit Unix milliseconds, a 16-bit counter, then
/// 58 random bits), so ids sort by send time, which history paging and the database index rely on.
/// The counter (RFC 9562 method 1) keeps ids made in the same millisecond in the order they were
/// made; it starts at a random value below 2^15 each new millisecond and carries into the
/// millisecond field when it overflows.
public enum MessageID {
    private static let hex = Array("0123456789abcdef".utf8)
    /// SplitMix64 over an atomic counter seeded from the system generator once: distinct values
    /// for every call of the process without a system call per id.
    private static let state: Atomic<UInt64> = {
        var generator = SystemRandomNumberGenerator()
        return Atomic(generator.next())
    }()

    private static func mixed() -> UInt64 {
        var z = state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The last id's millisecond (high 48 bits) and counter (low 16 bits).
    private static let last = Atomic<UInt64>(0)
    /// How far behind the last id's millisecond a new one may be and still continue its counter
    /// (a counter carry or a small clock step back); further back starts afresh.
    private static let carryWindow: UInt64 = 1_000

    /// The millisecond and counter for an id made at `ms`: the last pair plus one when `ms` is the
    /// last millisecond (or just behind it), else `ms` with a fresh counter.
    private static func stamp(ms: UInt64, fresh: UInt64) -> UInt64 {
        var old = last.load(ordering: .relaxed)
        while true {
            let lastMs = old >> 16
            let next = ms <= lastMs && lastMs - ms <= carryWindow ? old &+ 1 : ms << 16 | (fresh & 0x7FFF)
            let (exchanged, current) = last.compareExchange(expected: old, desired: next, ordering: .relaxed)
            if exchanged { return next }
            old = current
        }
    }

    /// A new id for a message sent at `milliseconds` (Unix time), in lower-case 8-4-4-4-12 form.
    public static func make(milliseconds: Int64) -> String {
        let random = mixed()
        let more = mixed()
        let stamped = stamp(ms: UInt64(max(0, milliseconds)) & 0xFFFF_FFFF_FFFF, fresh: random)
        let ms = stamped >> 16
        let counter = stamped & 0xFFFF
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: ms >> (40 - 8 * UInt64(i))) }
        bytes[6] = 0x70 | UInt8(truncatingIfNeeded: counter >> 12)
        bytes[7] = UInt8(truncatingIfNeeded: counter >> 4)
        bytes[8] = 0x80 | UInt8(truncatingIfNeeded: (counter & 0x0F) << 2 | (random >> 16) & 0x03)
        for i in 9..<16 { bytes[i] = UInt8(truncatingIfNeeded: more >> (8 * UInt64(i - 9))) }
        return format(bytes)
    }

    /// Whether `text` is a UUID in 8-4-4-4-12 hex form (any version; either case).
    public static func isValid(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (i, byte) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
                    continue
                default:
                    return false
                }
            }
        }
        return true
    }

    static func format(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
