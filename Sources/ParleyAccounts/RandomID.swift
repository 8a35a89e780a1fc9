/// Generators of Parse identifiers from libsodium's random source.
public enum RandomID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// A Parse objectId: 10 characters from `[A-Za-z0-9]`.
    public static func objectID() -> String {
        alphanumeric(length: 10)
    }

    /// `length` characters from `[A-Za-z0-9]` (Parse's `randomString`: generated usernames).
    public static func alphanumeric(length: Int) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(length)
        for _ in 0..<length {
            bytes.append(alphabet[Int(Sodium.uniform(UInt32(alphabet.count)))])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A revocable session token: `r:` followed by 32 lowercase hex digits (128 random bits).
    public static func sessionToken() -> String {
        "r:" + hex(Sodium.randomBytes(16))
    }

    /// Lowercase hex of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` has the shape of an objectId (1...32 characters of `[A-Za-z0-9]`).
    public static func isPlausibleObjectID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard (1...32).contains(utf8.count) else { return false }
        return utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }
    }
}
