import COpenSSL

/// HMAC through OpenSSL, shared by realtime (device labels), calls (TURN credentials) and identity.
public enum HMACDigest {
    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    public static func sha256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        digest(EVP_sha256(), key: key, message: message, length: 32)
    }

    /// HMAC-SHA1 of `message` under `key` (20 bytes).
    public static func sha1(key: [UInt8], message: [UInt8]) -> [UInt8] {
        digest(EVP_sha1(), key: key, message: message, length: 20)
    }

    private static func digest(_ md: OpaquePointer?, key: [UInt8], message: [UInt8], length expected: UInt32) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBufferPointer { messageBytes in
                HMAC(md, keyBytes.baseAddress, Int32(key.count), messageBytes.baseAddress, messageBytes.count, &digest, &length)
            }
        }
        precondition(done != nil && length == expected, "HMAC failed")
        return Array(digest.prefix(Int(length)))
    }
}
