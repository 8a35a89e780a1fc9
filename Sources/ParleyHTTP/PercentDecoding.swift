/// Percent-decoding of request-target parts (RFC 3986 §2.1).
enum PercentDecoding {
    /// Strictly decodes a path: every `%` must start a two-digit hex escape, the result must be
    /// UTF-8 without NUL. Nil otherwise.
    static func decodePath(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard bytes.contains(.percent) else {
            // Target bytes are visible ASCII already.
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let decoded = decodeSegment(bytes), !decoded.contains(0) else { return nil }
        return String(validating: decoded, as: UTF8.self)
    }

    /// Leniently decodes a query component: `+` is a space, a malformed escape stays as written,
    /// invalid UTF-8 becomes U+FFFD.
    static func decodeQueryComponent(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var first = 0
        while first < bytes.count, bytes[first] != .percent, bytes[first] != .plus { first += 1 }
        guard first < bytes.count else { return String(decoding: bytes, as: UTF8.self) }
        // Decoded straight into the string's memory (which repairs invalid UTF-8 as
        // `String(decoding:)` does); the part before the first escape is copied in one go.
        return String(unsafeUninitializedCapacity: bytes.count) { decoded in
            decoded.baseAddress.unsafelyUnwrapped.initialize(from: bytes.baseAddress.unsafelyUnwrapped, count: first)
            var written = first
            var index = first
            while index < bytes.count {
                let byte = bytes[index]
                if byte == .percent, index + 2 < bytes.count,
                   let high = HTTPCharacterClass.hexValue(bytes[index + 1]),
                   let low = HTTPCharacterClass.hexValue(bytes[index + 2]) {
                    decoded[written] = high << 4 | low
                    index += 3
                } else {
                    decoded[written] = byte == .plus ? .space : byte
                    index += 1
                }
                written += 1
            }
            return written
        }
    }

    /// Strictly decodes one path segment into bytes (for route matching); nil on a bad escape.
    static func decodeSegment(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == .percent {
                guard index + 2 < bytes.count,
                      let high = HTTPCharacterClass.hexValue(bytes[index + 1]),
                      let low = HTTPCharacterClass.hexValue(bytes[index + 2]) else { return nil }
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(byte)
                index += 1
            }
        }
        return decoded
    }
}
