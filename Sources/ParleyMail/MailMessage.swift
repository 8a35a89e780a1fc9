import ParleyLog
import ParleyNet

/// A mail as the outbox stores it: one recipient, the sender, subject and a plain-text body
/// with an optional HTML alternative.
public struct MailMessage: Sendable, Equatable {
    public var from: MailAddress
    public var to: MailAddress
    public var subject: String
    public var text: String
    public var html: String?

    /// Largest body (text plus HTML) accepted, in bytes.
    public static let maxBodyBytes = 256 * 1024

    public init(from: MailAddress, to: MailAddress, subject: String, text: String, html: String? = nil) throws(MailError) {
        guard text.utf8.count + (html?.utf8.count ?? 0) <= Self.maxBodyBytes else { throw .tooLarge }
        self.from = from
        self.to = to
        // A subject is one header line: line breaks would start new headers.
        self.subject = String(subject.unicodeScalars.map { $0 == "\r" || $0 == "\n" ? " " : Character($0) }.prefix(998))
        self.text = text
        self.html = html
    }

    /// The RFC 5322 message: headers, then a `multipart/alternative` body (or text only) in
    /// quoted-printable, lines ending in CRLF. `id` and `createdAt` (Unix ms) make `Message-ID`
    /// and `Date` stable across retries, so a mail sent twice after a crash is one message.
    public func rendered(id: Int64, createdAt: Int64, boundary: String) -> [UInt8] {
        var out = ""
        func header(_ name: String, _ value: String) { out += "\(name): \(value)\r\n" }
        header("From", from.header)
        header("To", to.header)
        header("Subject", Self.encodedWord(subject))
        header("Date", UTCTime.rfc5322(milliseconds: createdAt))
        header("Message-ID", "<parley.\(id).\(createdAt)@\(from.domain)>")
        header("MIME-Version", "1.0")
        if let html {
            header("Content-Type", "multipart/alternative; boundary=\"\(boundary)\"")
            out += "\r\n"
            out += "--\(boundary)\r\n"
            out += Self.part("text/plain", text)
            out += "--\(boundary)\r\n"
            out += Self.part("text/html", html)
            out += "--\(boundary)--\r\n"
        } else {
            out += Self.part("text/plain", text)
        }
        return Array(out.utf8)
    }

    private static func part(_ type: String, _ body: String) -> String {
        "Content-Type: \(type); charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + quotedPrintable(body) + "\r\n"
    }

    /// A header value in RFC 2047 `=?UTF-8?B?…?=` words when it is not plain ASCII.
    static func encodedWord(_ text: String) -> String {
        guard !text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return text }
        // Words of at most 45 bytes (60 base64 characters) without splitting a character.
        var words: [String] = []
        var chunk: [UInt8] = []
        for character in text {
            let bytes = Array(String(character).utf8)
            if chunk.count + bytes.count > 45 {
                words.append("=?UTF-8?B?\(Base64.encode(chunk))?=")
                chunk = []
            }
            chunk += bytes
        }
        if !chunk.isEmpty { words.append("=?UTF-8?B?\(Base64.encode(chunk))?=") }
        return words.joined(separator: "\r\n ")
    }

    /// Quoted-printable (RFC 2045 6.7): lines end in CRLF, at most 76 characters with soft
    /// breaks, `=`, controls, non-ASCII and trailing white space escaped.
    static func quotedPrintable(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        var lineLength = 0
        let normalized = text.replacingLineBreaks()
        let lines = normalized.split(separator: "\n", omittingEmptySubsequences: false)
        for (index, line) in lines.enumerated() {
            let bytes = Array(line.utf8)
            for (position, byte) in bytes.enumerated() {
                let isLast = position == bytes.count - 1
                let literal = (byte >= 33 && byte <= 126 && byte != UInt8(ascii: "=")) || ((byte == 32 || byte == 9) && !isLast)
                let width = literal ? 1 : 3
                if lineLength + width > 75 {
                    out += Array("=\r\n".utf8)
                    lineLength = 0
                }
                if literal {
                    out.append(byte)
                } else {
                    out += [UInt8(ascii: "="), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
                }
                lineLength += width
            }
            if index < lines.count - 1 {
                out += [13, 10]
                lineLength = 0
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A mailbox: an address and an optional display name.
public struct MailAddress: Sendable, Equatable, CustomStringConvertible {
    public let address: String
    public let name: String?

    /// Longest address accepted, in bytes (RFC 5321's path limit).
    public static let maxBytes = 254

    /// `address` must be `local@domain` without spaces, brackets or control characters.
    public init(_ address: String, name: String? = nil) throws(MailError) {
        let bytes = Array(address.utf8)
        guard bytes.count <= Self.maxBytes, let at = bytes.lastIndex(of: UInt8(ascii: "@")), at > 0, at < bytes.count - 1,
              bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") && $0 != UInt8(ascii: ",") })
        else { throw .invalidAddress(String(address.prefix(64))) }
        self.address = address
        self.name = name.map { String($0.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }.map(Character.init)) }
            .flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
    }

    /// Parses `Name <address>` or a bare address.
    public init(parsing text: String) throws(MailError) {
        if let open = text.lastIndex(of: "<"), text.hasSuffix(">") {
            let address = String(text[text.index(after: open)..<text.index(before: text.endIndex)])
            var name = String(text[..<open])
            while name.hasSuffix(" ") { name.removeLast() }
            if name.hasPrefix("\""), name.hasSuffix("\""), name.count >= 2 { name = String(name.dropFirst().dropLast()) }
            try self.init(address, name: name.isEmpty ? nil : name)
        } else {
            try self.init(text)
        }
    }

    var domain: String { String(address[address.index(after: address.lastIndex(of: "@")!)...]) }

    /// The header form: `"Name" <address>` (the name RFC 2047-encoded when not ASCII).
    var header: String {
        guard let name else { return "<\(address)>" }
        let encoded = MailMessage.encodedWord(name)
        return encoded == name ? "\"\(name)\" <\(address)>" : "\(encoded) <\(address)>"
    }

    public var description: String {
        guard let name else { return address }
        return "\(name) <\(address)>"
    }
}

/// Why a mail could not be queued.
public enum MailError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidAddress(String)
    case tooLarge
    /// The outbox table could not be written.
    case database(String)

    public var description: String {
        switch self {
        case .invalidAddress(let text): "invalid mail address \(text)"
        case .tooLarge: "mail body too large"
        case .database(let text): "mail outbox: \(text)"
        }
    }
}

extension String {
    /// CRLF and lone CR become LF.
    func replacingLineBreaks() -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        var previousCR = false
        for scalar in unicodeScalars {
            if scalar == "\r" {
                out.unicodeScalars.append("\n")
                previousCR = true
                continue
            }
            if scalar == "\n" && previousCR {
                previousCR = false
                continue
            }
            previousCR = false
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
