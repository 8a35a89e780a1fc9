/// A UUID without Foundation: 16 bytes, RFC 4122 version 4 when random, printed in the usual
/// 8-4-4-4-12 form. CallKit and LiveCommunicationKit take `Foundation.UUID(uuid: value.bytes)`.
public struct ParleyUUID: Sendable, Hashable, CustomStringConvertible {
    /// The 16 bytes in network order (the layout of `uuid_t`).
    public let bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                       UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)

    public init(bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                        UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)) {
        self.bytes = bytes
    }

    /// A random (version 4) UUID from the system's random source.
    public static func random() -> ParleyUUID {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// A version 4 UUID from `generator`.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> ParleyUUID {
        var raw = [UInt8](repeating: 0, count: 16)
        let high: UInt64 = generator.next(), low: UInt64 = generator.next()
        for i in 0..<8 {
            raw[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
            raw[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
        }
        raw[6] = raw[6] & 0x0F | 0x40  // version 4
        raw[8] = raw[8] & 0x3F | 0x80  // RFC 4122 variant
        return ParleyUUID(array: raw)
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in either case; nil for anything else.
    public init?(_ text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        var raw: [UInt8] = []
        raw.reserveCapacity(16)
        var index = 0
        while index < 36 {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard utf8[index] == UInt8(ascii: "-") else { return nil }
                index += 1
                continue
            }
            guard let high = Self.hexValue(utf8[index]), let low = Self.hexValue(utf8[index + 1]) else { return nil }
            raw.append(high << 4 | low)
            index += 2
        }
        self.init(array: raw)
    }

    private init(array raw: [UInt8]) {
        bytes = (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                 raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15])
    }

    /// The bytes as an array.
    public var array: [UInt8] {
        withUnsafeBytes(of: bytes) { Array($0) }
    }

    /// Lower-case text form (what Parley's `callId`s and `clientMessageId`s use).
    public var uuidString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in array.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { uuidString }

    public static func == (lhs: ParleyUUID, rhs: ParleyUUID) -> Bool { lhs.array == rhs.array }

    public func hash(into hasher: inout Hasher) { hasher.combine(array) }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
