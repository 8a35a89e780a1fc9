import CSodium

/// A stored file's name: Parse's unique prefix, `_`, and the name the client gave.
public struct FileName: Sendable, Hashable, CustomStringConvertible {
    public let value: String

    public var description: String { value }

    /// Parse Server's limit on the client's name.
    public static let maxClientNameBytes = 128

    /// A stored name read back from a URL or a File value: one path segment of Parse's characters.
    public init(stored: String) throws(FileError) {
        guard !stored.isEmpty, stored.utf8.count <= 32 + 1 + Self.maxClientNameBytes + 16,
              Self.isValid(stored) else { throw .invalidName("Filename contains invalid characters.") }
        value = stored
    }

    /// A new unique name for a client's `name` (validated as Parse Server's `validateFilename`),
    /// with the extension of `contentType` appended when the name has none (as Parse's
    /// FilesController does).
    public static func make(clientName name: String, contentType: String?) throws(FileError) -> FileName {
        guard name.utf8.count <= maxClientNameBytes else { throw .invalidName("Filename too long.") }
        guard !name.isEmpty, isValid(name) else { throw .invalidName("Filename contains invalid characters.") }
        var full = name
        if !full.utf8.contains(UInt8(ascii: ".")), let contentType, let ext = ContentType.fileExtension(for: contentType) {
            full += "." + ext
        }
        return FileName(unchecked: randomHex() + "_" + full)
    }

    private init(unchecked: String) { value = unchecked }

    /// 32 hex digits from libsodium's generator, Parse's `randomHexString(32)`.
    static func randomHex() -> String {
        _ = sodium_init()
        var bytes = [UInt8](repeating: 0, count: 16)
        randombytes_buf(&bytes, bytes.count)
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(32)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `^[_a-zA-Z0-9][a-zA-Z0-9@. ~_-]*$`, Parse Server's file name pattern.
    static func isValid(_ name: String) -> Bool {
        var first = true
        for byte in name.utf8 {
            let alnum = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            if first {
                guard alnum || byte == UInt8(ascii: "_") else { return false }
                first = false
                continue
            }
            switch byte {
            case UInt8(ascii: "@"), UInt8(ascii: "."), UInt8(ascii: " "), UInt8(ascii: "~"), UInt8(ascii: "_"), UInt8(ascii: "-"): continue
            default: guard alnum else { return false }
            }
        }
        return !first
    }

    /// The content type its extension names (Parse derives it from the name when serving).
    public var contentType: String { ContentType.forFileName(value) }
}
