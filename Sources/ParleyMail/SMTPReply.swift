/// One SMTP reply: a three-digit code and its text lines (RFC 5321 4.2).
public struct SMTPReply: Sendable, Equatable, CustomStringConvertible {
    public var code: Int
    /// The text of each line, without the code and separator.
    public var lines: [String]

    public init(code: Int, lines: [String]) {
        self.code = code
        self.lines = lines
    }

    /// 2xx.
    public var isPositive: Bool { (200..<300).contains(code) }

    public var description: String { "\(code) \(lines.joined(separator: " / "))" }
}

/// Splits a byte stream from an SMTP server into replies (multi-line `250-…` / `250 …`).
/// Sans-I/O: feed bytes with `append`, take replies with `next`.
struct SMTPReplyParser {
    /// Longest reply line accepted, in bytes (RFC 5321 allows 512; servers sometimes exceed it).
    static let maxLineBytes = 2048
    /// Most lines in one reply.
    static let maxLines = 100

    private var buffer: [UInt8] = []
    private var start = 0
    private var lines: [String] = []
    private var code: Int?

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    mutating func append(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    /// Bytes received after the last complete reply.
    var hasBufferedBytes: Bool { start < buffer.count }

    /// The next complete reply, nil when more bytes are needed.
    mutating func next() throws(SMTPError) -> SMTPReply? {
        while true {
            guard let newline = buffer[start...].firstIndex(of: 10) else {
                guard buffer.count - start <= Self.maxLineBytes else { throw .protocolViolation("reply line too long") }
                compact()
                return nil
            }
            var end = newline
            if end > start, buffer[end - 1] == 13 { end -= 1 }
            let line = buffer[start..<end]
            start = newline + 1
            guard line.count >= 3, line.count <= Self.maxLineBytes else { throw .protocolViolation("malformed reply line") }
            let digits = Array(line.prefix(3))
            guard digits.allSatisfy({ (48...57).contains($0) }), (2...5).contains(digits[0] - 48) else {
                throw .protocolViolation("reply without a code")
            }
            let lineCode = Int(digits[0] - 48) * 100 + Int(digits[1] - 48) * 10 + Int(digits[2] - 48)
            if let code, code != lineCode { throw .protocolViolation("reply lines with different codes") }
            code = lineCode
            let separator = line.count > 3 ? line[line.startIndex + 3] : 32
            guard separator == 32 || separator == UInt8(ascii: "-") else { throw .protocolViolation("malformed reply line") }
            lines.append(String(decoding: line.dropFirst(4), as: UTF8.self))
            guard lines.count <= Self.maxLines else { throw .protocolViolation("reply has too many lines") }
            if separator == 32 {
                let reply = SMTPReply(code: lineCode, lines: lines)
                lines = []
                code = nil
                compact()
                return reply
            }
        }
    }

    private mutating func compact() {
        if start > 0 && start * 2 >= buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
    }
}
